import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { BACKENDS } from './helpers/backends.ts';
import { startTestApp, type TestApp } from './helpers/harness.ts';

for (const backend of BACKENDS) {
  describe(`[${backend}] smoke`, () => {
    let t: TestApp;
    let token: string;
    before(async () => {
      t = await startTestApp(backend);
      token = (await t.issueToken()).token;
    });
    after(() => t.close());

    it('get-or-create with a JSON body on GET creates, then finds', async () => {
      const first = await t.request('GET', '/api/user', { token, body: { user_group_id: 'g1' } });
      assert.equal(first.status, 201);
      assert.equal(first.body.new_user_group, true);
      const second = await t.request('GET', '/api/user', { token, body: { user_group_id: 'g1' } });
      assert.equal(second.status, 200);
      assert.equal(second.body.user_group.token, first.body.user_group.token);
    });
  });
}
