// examples/postgres-rls end to end, on the real PostgreSQL: the service issues embed tokens,
// the example's data API (its own Fastify process, no secret, none of the service's code)
// verifies them with @fastify/jwt against the service's JWKS, accepts only its own account's,
// and queries as a role under row-level security.
// The service runs in-process on a real socket, so that its clock can issue a genuinely
// expired token; key rotation is the real command-line tool.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { SignJWT, decodeJwt, decodeProtectedHeader, generateKeyPair } from 'jose';
import { POSTGRES_URL } from './helpers/backends.ts';
import { startTestApp, type TestApp } from './helpers/harness.ts';
import { freePort, runUgs } from './helpers/processes.ts';
import { startDataApi, type DataApi } from './helpers/data-api.ts';
import { GENEROUS_WAIT_MS } from './helpers/wait.ts';

const skip = POSTGRES_URL ? false : 'TEST_POSTGRES_URL is not set: the row-level-security example needs PostgreSQL';
if (skip) process.stderr.write(`\n${'!'.repeat(78)}\n!! SKIPPING examples/postgres-rls: ${skip}\n${'!'.repeat(78)}\n\n`);

describe('examples/postgres-rls: from the embed token to the rows', { skip }, () => {
  let clock = () => new Date();
  let service: TestApp;
  let serviceUrl: string;
  let dataApi: DataApi;
  let apiToken: string;

  before(async () => {
    // The issuer is fixed when the app is built, so the port is chosen first.
    const port = await freePort();
    serviceUrl = `http://127.0.0.1:${port}`;
    service = await startTestApp('postgres', { now: () => clock(), config: { publicUrl: serviceUrl } });
    await service.app.listen({ host: '127.0.0.1', port });
    apiToken = (await service.issueToken()).token;
    for (const [id, region] of [
      ['acme-corp', 'emea'],
      ['globex', 'amer'],
    ]) {
      const created = await service.request('POST', '/api/user', { token: apiToken, body: { user_group_id: id, properties: { region } } });
      assert.equal(created.status, 201, created.text);
    }

    // With an API token, the data API follows the change events to refuse revoked embed tokens.
    dataApi = await startDataApi({
      UGS_ISSUER: serviceUrl,
      UGS_ACCOUNT: 'acme',
      AUDIENCE: 'ugs:embed,sales',
      JWKS_CACHE_SECONDS: '1',
      UGS_API_TOKEN: apiToken,
    });
  });

  after(async () => {
    await dataApi?.stop();
    await service?.close();
  });

  async function embedToken(body: Record<string, unknown>, token = apiToken): Promise<string> {
    const res = await service.request('POST', '/api/embed_token', { token, body });
    assert.equal(res.status, 200, res.text);
    return res.body.embed_token;
  }

  async function rows(
    path: string,
    token: string,
  ): Promise<{
    status: number;
    body: {
      environment?: string;
      user_group_id?: string;
      viewer_id?: string | null;
      rows?: Record<string, unknown>[];
      error?: { code: string; message: string };
    };
  }> {
    const res = await fetch(`${dataApi.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
    return { status: res.status, body: await res.json() };
  }

  it('two groups each see only their own rows, even for "select everything"', async () => {
    const acme = await rows('/orders', await embedToken({ user_group_id: 'acme-corp' }));
    const globex = await rows('/orders', await embedToken({ user_group_id: 'globex' }));
    assert.equal(acme.status, 200, JSON.stringify(acme.body));
    assert.deepEqual(
      acme.body.rows!.map((r) => r.product),
      ['Anvils', 'Rocket skates', 'Giant magnet'],
    );
    assert.deepEqual(
      globex.body.rows!.map((r) => r.product),
      ['Hammocks', 'Doomsday device'],
    );
    // A policy on a variable of the token: the group's region.
    assert.deepEqual(
      (await rows('/notices', await embedToken({ user_group_id: 'acme-corp' }))).body.rows!.map((r) => r.region),
      ['emea'],
    );
    assert.deepEqual(
      (await rows('/notices', await embedToken({ user_group_id: 'globex' }))).body.rows!.map((r) => r.region),
      ['amer'],
    );
  });

  it("two viewers of one group each see only their region's rows of that group, verified with the JWKS; a token without a viewer sees the whole group", async () => {
    const products = async (body: Record<string, unknown>) => {
      const answer = await rows('/orders', await embedToken(body));
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return { viewer: answer.body.viewer_id, products: answer.body.rows!.map((r) => `${r.product} (${r.region})`) };
    };
    assert.deepEqual(await products({ user_group_id: 'acme-corp', viewer: { id: 'ada', attributes: { region: 'emea' } } }), {
      viewer: 'ada',
      products: ['Anvils (emea)', 'Giant magnet (emea)'],
    });
    assert.deepEqual(await products({ user_group_id: 'acme-corp', viewer: { id: 'bruno', attributes: { region: 'amer' } } }), {
      viewer: 'bruno',
      products: ['Rocket skates (amer)'],
    });
    // The region filters within the group: never another group's rows of that region.
    assert.deepEqual(await products({ user_group_id: 'globex', viewer: { id: 'ada', attributes: { region: 'emea' } } }), {
      viewer: 'ada',
      products: ['Doomsday device (emea)'],
    });
    // No viewer, or a viewer without a region: the group's rows, all of them.
    assert.deepEqual(await products({ user_group_id: 'acme-corp' }), {
      viewer: null,
      products: ['Anvils (emea)', 'Rocket skates (amer)', 'Giant magnet (emea)'],
    });
    assert.deepEqual((await products({ user_group_id: 'acme-corp', viewer: { id: 'carla', attributes: { team: 'ops' } } })).products.length, 3);
    // A viewer of a region with no rows of the group sees none.
    assert.deepEqual((await products({ user_group_id: 'acme-corp', viewer: { id: 'dan', attributes: { region: 'apac' } } })).products, []);
  });

  it("a viewer's attributes cannot rewrite the group's variables: a policy on ugs_variables.region shows the group's region, whatever region the viewer names", async () => {
    // acme-corp is emea; its backend may mint with a read-only API token and name any viewer.
    const { token: readOnly } = await service.issueToken({ scopes: ['read'] });
    for (const token of [readOnly, apiToken]) {
      const asBruno = await embedToken({ user_group_id: 'acme-corp', viewer: { id: 'bruno', attributes: { region: 'amer' } } }, token);
      const notices = await rows('/notices', asBruno);
      assert.equal(notices.status, 200, JSON.stringify(notices.body));
      assert.deepEqual(
        notices.body.rows!.map((r) => r.region),
        ['emea'],
      );
      // The viewer's own region still narrows the group's orders (orders_of_the_viewer reads ugs_viewer).
      assert.deepEqual(
        (await rows('/orders', asBruno)).body.rows!.map((r) => r.product),
        ['Rocket skates'],
      );
    }
  });

  it("two accounts, and one account's two environments, with the same user_group_id: each sees only its own rows", async () => {
    // The same id in acme's Testing environment, and in another account of the same service.
    const { token: testingOnly } = await service.issueToken({ env: 'Testing' });
    const { token: intruder } = await service.issueToken({ account: 'intruder' });
    for (const [token, body] of [
      [apiToken, { user_group_id: 'acme-corp', api_environment_tag: 'Testing', properties: { region: 'emea' } }],
      [intruder, { user_group_id: 'acme-corp', properties: { region: 'emea' } }],
    ] as const) {
      const created = await service.request('POST', '/api/user', { token, body });
      assert.equal(created.status, 201, created.text);
    }
    // The other account's token is genuine, of a group of the same id, in the same environment: not this API's.
    for (const body of [{ user_group_id: 'acme-corp' }, { user_group_id: 'acme-corp', viewer: { id: 'ada', attributes: { region: 'emea' } } }]) {
      const stranger = await rows('/orders', await embedToken(body, intruder));
      assert.deepEqual([stranger.status, stranger.body.rows], [401, undefined], JSON.stringify(stranger.body));
      assert.equal(stranger.body.error?.code, 'invalid_token');
      assert.match(stranger.body.error!.message, /another account/);
    }
    assert.equal((await rows('/notices', await embedToken({ user_group_id: 'acme-corp' }, intruder))).status, 401);

    // The account's own group of that id in Testing is another group: its rows only, and the reverse.
    const testing = await rows('/orders', await embedToken({ user_group_id: 'acme-corp', api_environment_tag: 'Testing' }, testingOnly));
    const customer = await rows('/orders', await embedToken({ user_group_id: 'acme-corp' }));
    assert.deepEqual([testing.status, testing.body.rows?.map((r) => r.product)], [200, ['Test anvil']], JSON.stringify(testing.body));
    assert.deepEqual([customer.status, customer.body.rows?.map((r) => r.product)], [200, ['Anvils', 'Rocket skates', 'Giant magnet']]);
    assert.deepEqual([testing.body.environment, customer.body.environment], ['Testing', 'Customer']);
  });

  it('an expired token, a wrong audience, an unknown key or an altered token gets 401', async () => {
    const realNow = () => new Date();
    clock = () => new Date(Date.now() - 3_600_000); // issued an hour ago, for a minute
    const expired = await embedToken({ user_group_id: 'acme-corp', expires_in_seconds: 60 });
    clock = realNow;
    const genuine = await embedToken({ user_group_id: 'acme-corp' });
    const otherDashboard = await embedToken({ user_group_id: 'acme-corp', embed_id: 'finance' });
    const { alg } = decodeProtectedHeader(genuine);
    const foreign = await generateKeyPair(alg!);
    const unknownKey = await new SignJWT(decodeJwt(genuine))
      .setProtectedHeader({ alg: alg!, typ: 'ugs-embed+jwt', kid: 'not-a-published-key' })
      .sign(foreign.privateKey);
    const foreignUnderPublishedKid = await new SignJWT(decodeJwt(genuine))
      .setProtectedHeader({ alg: alg!, typ: 'ugs-embed+jwt', kid: decodeProtectedHeader(genuine).kid })
      .sign(foreign.privateKey);
    const [header, , signature] = genuine.split('.');
    const altered = `${header}.${Buffer.from(JSON.stringify({ ...decodeJwt(genuine), sub: 'globex' })).toString('base64url')}.${signature}`;
    // A viewer cannot widen their own view: a region changed in the claim breaks the signature.
    const asAda = await embedToken({ user_group_id: 'acme-corp', viewer: { id: 'ada', attributes: { region: 'emea' } } });
    const [adaHeader, , adaSignature] = asAda.split('.');
    const adaClaims = decodeJwt(asAda);
    const viewerAltered = `${adaHeader}.${Buffer.from(JSON.stringify({ ...adaClaims, ugs_viewer: { id: 'ada' } })).toString('base64url')}.${adaSignature}`;

    for (const [what, token] of Object.entries({ expired, otherDashboard, unknownKey, foreignUnderPublishedKid, altered, viewerAltered })) {
      const res = await rows('/orders', token);
      assert.equal(res.status, 401, `${what}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.rows, undefined, what);
    }
    assert.equal((await rows('/orders', genuine)).status, 200, 'the control');
    assert.equal((await rows('/orders', await embedToken({ user_group_id: 'acme-corp', embed_id: 'sales' }))).status, 200, 'a dashboard the API serves');
  });

  it('after ugs keys embed rotate, new tokens verify and older ones keep verifying until they expire', async () => {
    const older = await embedToken({ user_group_id: 'globex' });
    assert.equal((await rows('/orders', older)).status, 200);
    const rotated = await runUgs(['keys', 'embed', 'rotate', '--activate-in', '2s', '--json'], {
      DATABASE_URL: service.databaseUrl,
      UGS_SECRET_KEY: service.secretKey,
    });
    assert.equal(rotated.code, 0, rotated.stderr);
    const { kid } = JSON.parse(rotated.stdout);

    let newer = older;
    for (let waited = 0; decodeProtectedHeader(newer).kid !== kid && waited < GENEROUS_WAIT_MS; waited += 250) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      newer = await embedToken({ user_group_id: 'globex' });
    }
    assert.equal(decodeProtectedHeader(newer).kid, kid, 'the service signs with the new key after its activation');
    const viaNew = await rows('/orders', newer);
    assert.equal(viaNew.status, 200, JSON.stringify(viaNew.body));
    assert.deepEqual(
      viaNew.body.rows!.map((r) => r.product),
      ['Hammocks', 'Doomsday device'],
    );
    assert.equal((await rows('/orders', older)).status, 200, 'a token of the older key still verifies');
  });

  it('an embed token whose group is deleted, or whose group token is rotated, is refused once the change event arrives', async () => {
    for (const [id, change] of [
      ['soon-deleted', 'delete'],
      ['soon-rotated', 'rotate'],
    ] as const) {
      const created = await service.request('POST', '/api/user', { token: apiToken, body: { user_group_id: id } });
      assert.equal(created.status, 201, created.text);
      const token = await embedToken({ user_group_id: id });
      assert.equal((await rows('/orders', token)).status, 200);
      const changed =
        change === 'delete'
          ? await service.request('DELETE', '/api/user', { token: apiToken, query: { user_group_id: id } })
          : await service.request('POST', '/api/user', { token: apiToken, body: { current_token: created.body.user_group.token } });
      assert.equal(changed.status, 200, changed.text);
      let answer = await rows('/orders', token);
      for (const deadline = Date.now() + GENEROUS_WAIT_MS; answer.status === 200 && Date.now() < deadline; answer = await rows('/orders', token)) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.equal(answer.status, 401, `${change}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error?.code, 'invalid_token');
    }
  });

  it('the database role the example uses cannot bypass row-level security', async () => {
    const { role } = dataApi;
    const client = new pg.Client({ connectionString: dataApi.roleUrl });
    await client.connect();
    try {
      const {
        rows: [me],
      } = await client.query('select rolsuper, rolbypassrls from pg_roles where rolname = current_user');
      assert.deepEqual(me, { rolsuper: false, rolbypassrls: false });
      const {
        rows: [owner],
      } = await client.query("select tableowner from pg_tables where tablename = 'orders'");
      assert.notEqual(owner.tableowner, role, 'not the owner');
      assert.equal((await client.query('select count(*)::int as n from orders')).rows[0].n, 0, 'without settings: no row');
      await client.query("select set_config('ugs.user_group_id', 'acme-corp', false)");
      assert.equal((await client.query('select count(*)::int as n from orders')).rows[0].n, 0, 'a group without its environment: no row');
      await client.query("select set_config('ugs.environment', 'Customer', false)");
      assert.equal((await client.query('select count(*)::int as n from orders')).rows[0].n, 3);
      await client.query(`select set_config('ugs.viewer', '{"id": "ada", "attributes": {"region": "emea"}}', false)`);
      assert.equal((await client.query('select count(*)::int as n from orders')).rows[0].n, 2, "a viewer's region narrows the group's rows");
      await client.query("select set_config('ugs.viewer', '', false)");
      await client.query('set row_security = off');
      await assert.rejects(client.query('select * from orders'), /row-level security/, 'row_security = off errors instead of showing everything');
      await client.query('reset row_security');
      await assert.rejects(client.query('alter table orders disable row level security'), /must be owner/);
      await assert.rejects(client.query("insert into orders values (99, 'Customer', 'globex', 'emea', 'Forged', 1)"), /permission denied/);
    } finally {
      await client.end();
    }
  });
});
