// Two server processes on one database (one SQLite file; one PostgreSQL database): the
// concurrency promises (docs/api.md, "Concurrency and durability") hold across processes, and a revocation made
// with the command-line tool reaches every instance within a second (docs/api.md, "Tokens").
import { it } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { forEachBackend, assertExactlyOneCreated } from './helpers/harness.ts';
import { httpRequest, runUgs, issueTokenWithCli, useServerProcesses } from './helpers/processes.ts';

forEachBackend('two server processes sharing one database', (backend) => {
  const two = useServerProcesses(backend);

  const { on } = two;

  async function issueToken(): Promise<{ id: number; token: string }> {
    return issueTokenWithCli({ DATABASE_URL: two.database.url });
  }

  it('both instances start on one empty database and serve the same data', async () => {
    const created = await httpRequest(on(0), 'POST', '/api/user', { token: two.token, body: { user_group_id: 'shared' } });
    assert.equal(created.status, 201);
    const seen = await httpRequest(on(1), 'GET', '/api/user', { token: two.token, body: { user_group_id: 'shared' } });
    assert.equal(seen.status, 200);
    assert.equal(seen.body.new_user_group, false);
    assert.equal(seen.body.user_group.token, created.body.user_group.token);
  });

  it('40 concurrent get-or-create calls split across two processes create exactly one group', async () => {
    const id = `mi-goc-${crypto.randomUUID()}`;
    const responses = await Promise.all(
      Array.from({ length: 40 }, (_, i) => httpRequest(on(i), 'GET', '/api/user', { token: two.token, body: { user_group_id: id } })),
    );
    assertExactlyOneCreated(responses);
    for (const i of [0, 1]) {
      const list = await httpRequest(on(i), 'GET', `/api/users?q=${encodeURIComponent(id)}`, { token: two.token });
      assert.equal(list.body.user_groups.length, 1, `instance ${i} sees exactly one group`);
    }
  });

  it('30 concurrent creates of one key split across two processes give exactly one 201 and 409 for the rest', async () => {
    const id = `mi-create-${crypto.randomUUID()}`;
    const responses = await Promise.all(
      Array.from({ length: 30 }, (_, i) => httpRequest(on(i), 'POST', '/api/user', { token: two.token, body: { user_group_id: id, name: `attempt ${i}` } })),
    );
    const won = responses.filter((r) => r.status === 201);
    const lost = responses.filter((r) => r.status === 409);
    assert.equal(won.length, 1, `statuses: ${responses.map((r) => r.status).join(',')}`);
    assert.equal(lost.length, 29);
    for (const r of lost) assert.equal(r.body.error.code, 'user_group_exists');
    const stored = await httpRequest(on(1), 'GET', '/api/user', { token: two.token, body: { user_group_id: id } });
    assert.equal(stored.status, 200);
    assert.equal(stored.body.user_group.name, won[0].body.user_group.name);
    assert.equal(stored.body.user_group.token, won[0].body.user_group.token);
  });

  it('20 concurrent rotations split across two processes give exactly one 200 and the winner’s token is current on both', async () => {
    const id = `mi-rotate-${crypto.randomUUID()}`;
    const created = await httpRequest(on(0), 'POST', '/api/user', { token: two.token, body: { user_group_id: id } });
    assert.equal(created.status, 201);
    const currentToken: string = created.body.user_group.token;
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => httpRequest(on(i), 'POST', '/api/user', { token: two.token, body: { current_token: currentToken } })),
    );
    const won = responses.filter((r) => r.status === 200);
    const lost = responses.filter((r) => r.status === 404);
    assert.equal(won.length, 1, `statuses: ${responses.map((r) => r.status).join(',')}`);
    assert.equal(lost.length, 19);
    for (const r of lost) assert.equal(r.body.error.code, 'token_not_found');
    const newToken: string = won[0].body.user_group.token;
    for (const i of [0, 1]) {
      const after = await httpRequest(on(i), 'GET', '/api/user', { token: two.token, body: { user_group_id: id } });
      assert.equal(after.status, 200);
      assert.equal(after.body.user_group.token, newToken, `instance ${i} returns the winner’s token`);
    }
  });

  // Each instance remembers the tokens it has opened (OpenedTokenCache): what one instance
  // remembers must never outlive a change made by the other.
  it('after an instance has returned a group’s token, a rotation on the other instance makes both return the new token', async () => {
    const id = `mi-cache-rotate-${crypto.randomUUID()}`;
    const created = await httpRequest(on(0), 'POST', '/api/user', { token: two.token, body: { user_group_id: id } });
    assert.equal(created.status, 201);
    for (const i of [0, 1]) {
      const seen = await httpRequest(on(i), 'GET', '/api/user', { token: two.token, body: { user_group_id: id } });
      assert.equal(seen.body.user_group.token, created.body.user_group.token);
    }
    const rotated = await httpRequest(on(0), 'POST', '/api/user', { token: two.token, body: { current_token: created.body.user_group.token } });
    assert.equal(rotated.status, 200);
    assert.notEqual(rotated.body.user_group.token, created.body.user_group.token);
    for (const i of [1, 0]) {
      const after = await httpRequest(on(i), 'GET', '/api/user', { token: two.token, body: { user_group_id: id } });
      assert.equal(after.body.user_group.token, rotated.body.user_group.token, `instance ${i} returns the rotated token`);
    }
  });

  it('after an instance has returned a group’s token, a delete and re-create on the other instance makes both return the new group’s token', async () => {
    const id = `mi-cache-recreate-${crypto.randomUUID()}`;
    const first = await httpRequest(on(0), 'GET', '/api/user', { token: two.token, body: { user_group_id: id } });
    assert.equal(first.status, 201);
    const seen = await httpRequest(on(1), 'GET', '/api/user', { token: two.token, body: { user_group_id: id } });
    assert.equal(seen.body.user_group.token, first.body.user_group.token);
    assert.equal((await httpRequest(on(0), 'DELETE', '/api/user', { token: two.token, body: { user_group_id: id } })).status, 200);
    const again = await httpRequest(on(0), 'POST', '/api/user', { token: two.token, body: { user_group_id: id } });
    assert.equal(again.status, 201);
    assert.notEqual(again.body.user_group.team_id, first.body.user_group.team_id);
    for (const i of [1, 0]) {
      const after = await httpRequest(on(i), 'GET', '/api/user', { token: two.token, body: { user_group_id: id } });
      assert.equal(after.body.user_group.team_id, again.body.user_group.team_id);
      assert.equal(after.body.user_group.token, again.body.user_group.token, `instance ${i} returns the new group's token`);
    }
  });

  it('an API token revoked with the CLI is refused by both instances within about a second', async () => {
    const victim = await issueToken();
    // Warm both instances' token caches, and keep them warm until the revocation.
    for (const i of [0, 1]) {
      const r = await httpRequest(on(i), 'GET', '/api/users', { token: victim.token });
      assert.equal(r.status, 200);
    }
    let warming = true;
    const warm = (async () => {
      while (warming) {
        await Promise.all([0, 1].map((i) => httpRequest(on(i), 'GET', '/api/users', { token: victim.token })));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();

    const revoked = await runUgs(['token', 'revoke', String(victim.id)], { DATABASE_URL: two.database.url });
    // The revocation is committed before the command exits: measure from here.
    const committedBy = Date.now();
    warming = false;
    await warm;
    assert.equal(revoked.code, 0, revoked.stderr);

    const refusedAfter = await Promise.all(
      [0, 1].map(async (i) => {
        for (;;) {
          const r = await httpRequest(on(i), 'GET', '/api/users', { token: victim.token });
          if (r.status === 401) {
            assert.equal(r.body.error.code, 'invalid_api_token');
            return Date.now() - committedBy;
          }
          assert.equal(r.status, 200);
          if (Date.now() - committedBy > 5000) return Infinity;
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      }),
    );
    for (const [i, ms] of refusedAfter.entries()) {
      assert.ok(ms <= 1500, `instance ${i} still accepted the revoked token ${ms} ms after the revocation`);
    }
    // And it stays refused; the other token still works.
    for (const i of [0, 1]) {
      assert.equal((await httpRequest(on(i), 'GET', '/api/users', { token: victim.token })).status, 401);
      assert.equal((await httpRequest(on(i), 'GET', '/api/users', { token: two.token })).status, 200);
    }
  });
});
