// The audit log (docs/api.md, "GET /api/user/history"): every change to a user group or an API token is
// appended in the same transaction as the change, with the acting token and request id,
// never a token value; failed requests leave no entry.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, useTestApp } from './helpers/harness.ts';
import { accountHistory } from '../src/audit/audit.repository.ts';
import { findAccountBySlug } from '../src/accounts/accounts.repository.ts';

forEachBackend('history', (backend) => {
  const t = useTestApp(backend);

  const history = (userGroupId: string, env?: string) =>
    t.request('GET', '/api/user/history', { token: t.token, query: { user_group_id: userGroupId, ...(env ? { api_environment_tag: env } : {}) } });

  it('records create, update (with the changed fields), rotate and delete, newest first, with actor and request id', async () => {
    const created = await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: 'h1', name: 'One' } });
    assert.equal(created.status, 201);
    const updated = await t.request('PUT', '/api/user', {
      token: t.token,
      body: { user_group_id: 'h1', name: 'Uno', properties: { a: 1 }, is_demo_group: false },
    });
    assert.equal(updated.status, 200);
    const rotated = await t.request('POST', '/api/user', { token: t.token, body: { current_token: updated.body.user_group.token } });
    assert.equal(rotated.status, 200);
    const deleted = await t.request('DELETE', '/api/user', { token: t.token, query: { user_group_id: 'h1' } });
    assert.equal(deleted.status, 200);

    const res = await history('h1');
    assert.equal(res.status, 200);
    assert.equal(res.body.provided_id, 'h1');
    assert.equal(res.body.api_environment_tag, 'Customer');
    const entries = res.body.entries;
    assert.deepEqual(
      entries.map((e: { action: string }) => e.action),
      ['user_group.delete', 'user_group.rotate', 'user_group.update', 'user_group.create'],
    );
    // is_demo_group was sent with its stored value: only what changed is named.
    assert.deepEqual(entries[2].changed_fields, ['name', 'properties']);
    assert.equal(entries[0].changed_fields, null);
    for (const e of entries) {
      assert.equal(e.actor_token_id, t.tokenId);
      assert.equal(e.team_id, created.body.user_group.team_id);
    }
    assert.deepEqual(
      entries.map((e) => e.request_id),
      [deleted, rotated, updated, created].map((r) => r.headers['x-request-id']),
      'each entry carries the request id the caller saw',
    );
    assert.ok(entries.every((e: { created_at: string }, i: number) => i === 0 || e.created_at <= entries[i - 1].created_at));
  });

  it('failed requests leave no entry', async () => {
    await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: 'h2' } });
    const before = (await history('h2')).body.entries.length;
    assert.equal((await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: 'h2' } })).status, 409);
    assert.equal((await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: 'h2', name: '' } })).status, 400);
    assert.equal((await t.request('POST', '/api/user', { token: t.token, body: { current_token: 'ugs_grp_nope' } })).status, 404);
    const readOnly = (await t.issueToken({ scopes: ['read'] })).token;
    assert.equal((await t.request('PUT', '/api/user', { token: readOnly, body: { user_group_id: 'h2', name: 'x' } })).status, 403);
    assert.equal((await history('h2')).body.entries.length, before);
  });

  it('a PUT that changes nothing records nothing', async () => {
    await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: 'h3', name: 'Same' } });
    assert.equal((await t.request('PUT', '/api/user', { token: t.token, body: { user_group_id: 'h3', name: 'Same' } })).status, 200);
    assert.deepEqual(
      (await history('h3')).body.entries.map((e: { action: string }) => e.action),
      ['user_group.create'],
    );
  });

  it('history is per environment and per account', async () => {
    await t.request('POST', '/api/user', { token: t.token, body: { user_group_id: 'h4', api_environment_tag: 'Testing' } });
    assert.equal((await history('h4', 'Testing')).body.entries.length, 1);
    assert.equal((await history('h4', 'Customer')).body.entries.length, 0);
    const other = (await t.issueToken({ account: 'globex' })).token;
    const res = await t.request('GET', '/api/user/history', { token: other, query: { user_group_id: 'h4', api_environment_tag: 'Testing' } });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.entries, []);
  });

  it('API token issue and revoke are recorded too, and no entry holds a token value', async () => {
    const issued = await t.issueToken({ account: 'audited' });
    await t.revokeToken(issued.id);
    const account = await findAccountBySlug(t.handle.db, 'audited');
    const rows = await accountHistory(t.handle.db, account!.id, 10);
    assert.deepEqual(
      rows.map((r) => [r.action, r.subject_id]),
      [
        ['api_token.revoke', String(issued.id)],
        ['api_token.issue', String(issued.id)],
      ],
    );
    const groupToken = (await t.request('GET', '/api/user', { token: t.token, query: { user_group_id: 'h5' } })).body.user_group.token;
    const everything = JSON.stringify(await t.handle.db.selectFrom('audit_log').selectAll().execute());
    for (const secret of [t.token, issued.token, groupToken]) assert.ok(!everything.includes(secret), 'no token in the audit log');
  });
});
