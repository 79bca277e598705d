// Node 24.19+ aborted a server on better-sqlite3 12 ("Assertion failed: (env) != nullptr" in
// RemoveEnvironmentCleanupHook, from Statement::~Statement()) when statements were finalized
// by the garbage collector or at exit. This soak runs the compiled server under whatever Node
// runs the tests (CI: Node 24) with a collection forced every few milliseconds, sends it
// requests that prepare many different statements (tag lists of every length, every
// combination of updated fields, list filters, the hierarchy, history, deletes), then stops it
// with SIGTERM: it must exit 0, having answered everything, with no abort on its stderr.
// Bounded by its request count, not by time.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { createTestDatabase } from './helpers/backends.ts';
import { ROOT, httpRequest, issueTokenWithCli, spawnServer } from './helpers/processes.ts';

const ROUNDS = 2;
const MAX_TAGS = 50;
const UPDATABLE = ['name', 'mapping', 'properties', 'is_demo_group', 'group_tags'] as const;

function updateBody(id: string, fields: number, round: number): Record<string, unknown> {
  const body: Record<string, unknown> = { user_group_id: id };
  UPDATABLE.forEach((field, bit) => {
    if ((fields & (1 << bit)) === 0) return;
    body[field] = {
      name: `renamed ${round}`,
      mapping: { [String(round)]: 'source' },
      properties: { round, nested: { fields } },
      is_demo_group: round % 2 === 0,
      group_tags: [`t${fields}`],
    }[field];
  });
  return body;
}

describe('soak: the server under forced garbage collection', () => {
  let dropDatabase: (() => Promise<void>) | undefined;
  after(async () => dropDatabase?.());

  it(`soak (node ${process.versions.node}): many prepared statements, forced collections and SIGTERM end in exit 0 without an abort`, async () => {
    const database = await createTestDatabase('sqlite');
    dropDatabase = database.drop;
    const env = { DATABASE_URL: database.url, UGS_KEY_FILE: path.join(path.dirname(database.url.slice('sqlite:'.length)), 'secret.key'), UGS_SECRET_KEY: '' };
    const { token } = await issueTokenWithCli(env);
    const server = await spawnServer(env, { nodeArgs: ['--expose-gc', '--import', path.join(ROOT, 'test/helpers/gc-pressure.mjs')] });
    const call = async (method: string, url: string, body?: unknown) => {
      const response = await httpRequest(server.baseUrl, method, url, { token, body });
      assert.ok(response.status < 300, `${method} ${url}: ${response.status} ${response.text}`);
      return response;
    };
    let answered = 0;
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const parent = `soak-parent-${round}`;
        await call('POST', '/api/user', { user_group_id: parent });
        // A multi-row insert of n tags is a statement of its own for every n.
        for (let tags = 1; tags <= MAX_TAGS; tags++) {
          const id = `soak-${round}-${tags}`;
          await call('POST', '/api/user', {
            user_group_id: id,
            parent_user_group_id: tags % 3 === 0 ? parent : undefined,
            group_tags: Array.from({ length: tags }, (_, i) => `tag-${String(i).padStart(2, '0')}`),
          });
          await call('PUT', '/api/user', updateBody(id, tags % (1 << UPDATABLE.length) || 1, round));
          answered += 2;
        }
        for (let fields = 1; fields < 1 << UPDATABLE.length; fields++) {
          await call('PUT', '/api/user', updateBody(`soak-${round}-1`, fields, round));
          answered++;
        }
        const lists = ['limit=5', 'q=soak', 'tag=tag-00', 'tag=tag-10&q=soak', `parent_user_group_id=${parent}`, 'limit=500', 'api_environment_tag=Testing'];
        for (const query of lists) await call('GET', `/api/users?${query}`);
        await call('GET', `/api/user/history?user_group_id=soak-${round}-1`);
        await call('GET', `/api/user?user_group_id=soak-${round}-2`);
        for (let tags = 1; tags <= MAX_TAGS; tags += 7) await call('DELETE', `/api/user?user_group_id=soak-${round}-${tags}`);
        answered += lists.length + 2 + Math.ceil(MAX_TAGS / 7);
      }
    } finally {
      const ended = await server.stop('SIGTERM');
      const output = server.output();
      assert.doesNotMatch(output, /Assertion failed|Aborted|core dumped/, output.slice(-2000));
      assert.deepEqual(ended, { code: 0, signal: null }, output.slice(-2000));
      const forced = Number(/gc-pressure: (\d+) forced collections/.exec(output)?.[1]);
      assert.ok(forced > 0, `collections were forced:\n${output.slice(-2000)}`);
      assert.match(output, /"msg":"stopped"/);
    }
    assert.ok(answered >= 250, `answered ${answered} requests`);
  });
});
