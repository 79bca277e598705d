// Races inside one server, over real sockets: the database, not luck, decides who creates and
// who rotates (docs/api.md, "Concurrency and durability"). The same races against one process,
// and against two workers of one server (UGS_WORKERS=2), whose requests each worker takes a
// share of.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { forEachBackend, assertExactlyOneCreated } from './helpers/harness.ts';
import { httpRequest, spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';
import { answeredBy } from './helpers/workers.ts';

for (const workers of [1, 2]) {
  forEachBackend(workers === 1 ? 'concurrency in one server process' : 'concurrency in one server of 2 workers', (backend) => {
    let database: TestDatabase;
    let server: ServerProcess;
    let token: string;
    /** The X-Request-Id of every racing request. */
    const raced: string[] = [];
    const race = async (requests: Promise<Awaited<ReturnType<typeof httpRequest>>>[]) => {
      const responses = await Promise.all(requests);
      raced.push(...responses.map((r) => String(r.headers['x-request-id'])));
      return responses;
    };

    before(async () => {
      database = await createTestDatabase(backend);
      const env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64'), UGS_WORKERS: String(workers) };
      server = await spawnServer(env);
      const issued = await issueTokenWithCli({ DATABASE_URL: database.url });
      token = issued.token;
    });

    after(async () => {
      await server?.stop('SIGTERM');
      await database?.drop();
    });

    it('40 concurrent get-or-create calls for one new id create exactly one group, and all agree on team_id and token', async () => {
      const id = `race-goc-${crypto.randomUUID()}`;
      const responses = await race(Array.from({ length: 40 }, () => httpRequest(server.baseUrl, 'GET', '/api/user', { token, body: { user_group_id: id } })));
      const created = assertExactlyOneCreated(responses);

      const list = await httpRequest(server.baseUrl, 'GET', `/api/users?q=${encodeURIComponent(id)}`, { token });
      assert.equal(list.status, 200);
      assert.equal(list.body.user_groups.length, 1, 'exactly one group exists');
      assert.equal(list.body.user_groups[0].team_id, created.body.user_group.team_id);
    });

    it('30 concurrent creates of one key give exactly one 201 and 409 user_group_exists for the rest', async () => {
      const id = `race-create-${crypto.randomUUID()}`;
      const responses = await race(
        Array.from({ length: 30 }, (_, i) => httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id, name: `attempt ${i}` } })),
      );
      const won = responses.filter((r) => r.status === 201);
      const lost = responses.filter((r) => r.status === 409);
      assert.equal(won.length, 1, `statuses: ${responses.map((r) => r.status).join(',')}`);
      assert.equal(lost.length, 29);
      for (const r of lost) {
        assert.equal(r.body.success, 0);
        assert.equal(r.body.error.code, 'user_group_exists');
      }
      // The losers changed nothing: the stored group is the winner's.
      const stored = await httpRequest(server.baseUrl, 'GET', '/api/user', { token, body: { user_group_id: id } });
      assert.equal(stored.status, 200);
      assert.equal(stored.body.user_group.name, won[0].body.user_group.name);
      assert.equal(stored.body.user_group.token, won[0].body.user_group.token);
      assert.equal(stored.body.user_group.team_id, won[0].body.user_group.team_id);
    });

    it('20 concurrent rotations of one current_token give exactly one 200, 404 token_not_found for the rest, and the winner’s token is current', async () => {
      const id = `race-rotate-${crypto.randomUUID()}`;
      const created = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: id } });
      assert.equal(created.status, 201);
      const currentToken: string = created.body.user_group.token;

      const responses = await race(
        Array.from({ length: 20 }, () => httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { current_token: currentToken } })),
      );
      const won = responses.filter((r) => r.status === 200);
      const lost = responses.filter((r) => r.status === 404);
      assert.equal(won.length, 1, `statuses: ${responses.map((r) => r.status).join(',')}`);
      assert.equal(lost.length, 19);
      for (const r of lost) assert.equal(r.body.error.code, 'token_not_found');
      const newToken: string = won[0].body.user_group.token;
      assert.notEqual(newToken, currentToken);

      const after = await httpRequest(server.baseUrl, 'GET', '/api/user', { token, body: { user_group_id: id } });
      assert.equal(after.status, 200);
      assert.equal(after.body.user_group.token, newToken, 'the token the winner returned is the group’s token afterwards');
      assert.equal(after.body.user_group.team_id, created.body.user_group.team_id);

      // The old token can no longer be rotated; the new one can.
      const again = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { current_token: currentToken } });
      assert.equal(again.status, 404);
      const next = await httpRequest(server.baseUrl, 'POST', '/api/user', { token, body: { current_token: newToken } });
      assert.equal(next.status, 200);
    });

    if (workers > 1) {
      it(`${workers} workers: the racing requests above were answered by every worker`, async () => {
        const answered = await answeredBy(server, raced);
        assert.equal(new Set(answered.values()).size, workers);
      });
    }
  });
}
