// Embed tokens every common verifier accepts, proven with the verifiers customers run: a real
// server process with its defaults (ES256), then after `ugs keys embed rotate --alg` to each
// algorithm, and each verifier exactly as docs/verify-embed-tokens.md shows it
// (examples/verify-embed-token/): jose; jsonwebtoken + jwks-rsa; fast-jwt + get-jwks, which
// finds the keys from the issuer alone (/.well-known/openid-configuration); @fastify/jwt in
// examples/postgres-rls's data API, which answers the viewer's rows; PyJWT from Debian's
// python3-jwt; golang-jwt with go-jose from Debian's Go packages. Each checks iss, aud, exp,
// nbf and the account (every account's tokens share the issuer and the keys). Each must accept
// the genuine tokens of the algorithms it implements (a token of the key before the rotation
// included, a token of the same id in the account's other environment, which names another
// subject, and a token that names a viewer, whose ugs_viewer each must read back: the viewer's
// id and region) and refuse every forgery below and a genuine token of another account for a
// group of the same id; the whole matrix is compared at once, so a failure shows every cell
// that moved.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SignJWT, decodeJwt, decodeProtectedHeader, exportSPKI, generateKeyPair, importJWK, type CryptoKey, type JSONWebKeySet } from 'jose';
import { Keyring } from '../src/crypto/keyring.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import type { DatabaseHandle } from '../src/db/database.ts';
import { EMBED_SIGNING_ALGORITHMS, type EmbedSigningAlgorithm } from '../src/config.ts';
import { BACKENDS, POSTGRES_URL, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { ROOT, freePort, httpRequest, issueTokenWithCli, runUgs, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { startDataApi, type DataApi } from './helpers/data-api.ts';
import { resignWithServiceKey } from './helpers/embed-keys.ts';
import { skippedPart } from './helpers/skips.ts';
import { GENEROUS_WAIT_MS } from './helpers/wait.ts';

const SNIPPETS = path.join(ROOT, 'examples', 'verify-embed-token');
const AUDIENCE = 'ugs:embed';
/** The account whose tokens every verifier serves; INTRUDER has a group of the same id. */
const ACCOUNT = 'interop';
const INTRUDER = 'intruder';
/** The group examples/postgres-rls has sample rows for (three orders in Customer, one in Testing). */
const VIEWER = 'acme-corp';
const SUBJECT = `${ACCOUNT}:Customer:${VIEWER}`;
const PYTHON = '/usr/bin/python3'; // Debian's, where python3-jwt installs
const GO = '/usr/bin/go';
const GO_PACKAGES = ['github.com/golang-jwt/jwt', 'gopkg.in/square/go-jose.v2'].map((p) => path.join('/usr/share/gocode/src', p));

// ---- which verifiers can run here ----

/** The verifiers this machine cannot run, with why: each test that leaves them out says so in the run's list of skips. */
const missingVerifiers: [name: string, reason: string][] = [];

/** Why a verifier cannot run on this machine, or false. CI installs all of them (.ci/run), so there a missing one fails. */
function missing(name: string, reason: string | false): string | false {
  if (!reason) return false;
  assert.ok(!process.env.CI, `${name}: ${reason}; .ci/run installs it, so CI must have it`);
  process.stderr.write(`\n${'!'.repeat(78)}\n!! SKIPPING the ${name} verifier: ${reason}\n${'!'.repeat(78)}\n\n`);
  missingVerifiers.push([name, reason]);
  return reason;
}
const noPyJwt = missing(
  'PyJWT',
  spawnSync(PYTHON, ['-c', 'import jwt, cryptography']).status === 0 ? false : `${PYTHON} cannot import jwt and cryptography: apt-get install -y python3-jwt`,
);
const noGo = missing(
  'golang-jwt',
  fs.existsSync(GO) && GO_PACKAGES.every((p) => fs.existsSync(p))
    ? false
    : 'apt-get install -y golang-go golang-github-golang-jwt-jwt-dev golang-gopkg-square-go-jose.v2-dev',
);
const noDataApi = missing('@fastify/jwt data API', POSTGRES_URL ? false : 'TEST_POSTGRES_URL is not set: examples/postgres-rls needs PostgreSQL');

// ---- the verifiers ----

/**
 * What a verifier concluded about one token: the `sub` it accepted, and the viewer it read
 * from `ugs_viewer` (`<id>/<region>`), or why it refused.
 */
type Outcome = { accepted: true; sub: string; viewer?: string; detail?: string } | { accepted: false; detail: string };

/** The viewer of the genuine token that names one: a person of the group VIEWER. */
const ADA = { id: 'ada', email: 'ada@example.com', time_zone: 'Europe/London', attributes: { region: 'emea', can_export: true } };

/** What the test reads of the claims a verifier answers. */
interface VerifiedClaims {
  sub?: string;
  ugs_viewer?: { id?: unknown; attributes?: { region?: unknown } };
}

/** The viewer as a verifier's claims give it back: `<id>/<region>`, undefined when the token names none. */
function viewerRead(claims: VerifiedClaims): string | undefined {
  const viewer = claims.ugs_viewer;
  return viewer === undefined ? undefined : `${String(viewer.id)}/${String(viewer.attributes?.region)}`;
}

interface Verifier {
  name: string;
  /** The algorithms it implements: a genuine token of another one is refused, and that is expected. */
  algorithms: readonly EmbedSigningAlgorithm[];
  /** Verifies the tokens in order; each call starts a verifier as a data API would after a deploy. */
  run(tokens: string[]): Promise<Outcome[]>;
}

/**
 * The key set that lists EdDSA keys too (docs/api.md, "Keys"): the default one lists the ES256
 * and RS256 keys only, so a verifier that implements EdDSA accepts its tokens only from here.
 */
const WITH_EDDSA = '/.well-known/jwks.json?alg=ES256,RS256,EdDSA';

/** A Node snippet of docs/verify-embed-tokens.md, imported as it is; `jwksPath`: the key set it is pointed at, when not its default. */
function nodeVerifier(name: string, file: string, algorithms: readonly EmbedSigningAlgorithm[], issuer: () => string, jwksPath?: string): Verifier {
  return {
    name,
    algorithms,
    async run(tokens) {
      const { embedTokenVerifier } = (await import(path.join(SNIPPETS, file))) as {
        embedTokenVerifier(o: { issuer: string; audience: string; account: string; jwksUrl?: string }): (token: string) => Promise<VerifiedClaims>;
      };
      const verify = embedTokenVerifier({
        issuer: issuer(),
        audience: AUDIENCE,
        account: ACCOUNT,
        ...(jwksPath === undefined ? {} : { jwksUrl: `${issuer()}${jwksPath}` }),
      });
      const outcomes: Outcome[] = [];
      for (const token of tokens) {
        try {
          const claims = await verify(token);
          outcomes.push({ accepted: true, sub: String(claims.sub), viewer: viewerRead(claims) });
        } catch (err) {
          outcomes.push({ accepted: false, detail: (err as Error).message });
        }
      }
      return outcomes;
    },
  };
}

/** A program that reads one token a line and writes one JSON line each: {"claims": …} or {"error": …}; `jwksPath`: its UGS_JWKS_URL, when set. */
function lineVerifier(name: string, algorithms: readonly EmbedSigningAlgorithm[], command: () => string[], issuer: () => string, jwksPath?: string): Verifier {
  return {
    name,
    algorithms,
    run: (tokens) =>
      new Promise((resolve, reject) => {
        const [program, ...args] = command();
        const env: NodeJS.ProcessEnv = { ...process.env, UGS_ISSUER: issuer(), UGS_AUDIENCE: AUDIENCE, UGS_ACCOUNT: ACCOUNT };
        if (jwksPath !== undefined) env.UGS_JWKS_URL = `${issuer()}${jwksPath}`;
        const child = spawn(program, args, { cwd: ROOT, env });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c) => (stdout += c));
        child.stderr.on('data', (c) => (stderr += c));
        child.on('error', reject);
        child.on('close', (code) => {
          const lines = stdout.trim().split('\n').filter(Boolean);
          if (code !== 0 || lines.length !== tokens.length) {
            reject(new Error(`${name} exited ${code} with ${lines.length} answers for ${tokens.length} tokens:\n${stdout}\n${stderr}`));
            return;
          }
          resolve(
            lines.map((line) => {
              const answer = JSON.parse(line) as { claims?: VerifiedClaims; error?: string };
              return answer.claims
                ? { accepted: true, sub: String(answer.claims.sub), viewer: viewerRead(answer.claims) }
                : { accepted: false, detail: String(answer.error) };
            }),
          );
        });
        child.stdin.end(tokens.join('\n') + '\n');
      }),
  };
}

/** Builds the Go snippet once, with Debian's packages only (GOPATH mode: no module proxy is reachable). */
let goBinary: Promise<string> | undefined;
function buildGoVerifier(): Promise<string> {
  goBinary ??= (async () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-go-verifier-'));
    process.on('exit', () => fs.rmSync(work, { recursive: true, force: true }));
    // Debian installs golang-jwt v4 at its import path without /v4: a second GOPATH entry gives it the module path the snippet imports.
    const v4 = path.join(work, 'gopath/src/github.com/golang-jwt/jwt/v4');
    fs.mkdirSync(path.dirname(v4), { recursive: true });
    fs.symlinkSync('/usr/share/gocode/src/github.com/golang-jwt/jwt', v4);
    const binary = path.join(work, 'verify');
    const built = spawnSync(GO, ['build', '-o', binary, '.'], {
      cwd: path.join(SNIPPETS, 'go'),
      env: { ...process.env, GO111MODULE: 'off', GOPATH: `${path.join(work, 'gopath')}:/usr/share/gocode`, GOCACHE: path.join(work, 'cache'), GOFLAGS: '' },
      encoding: 'utf8',
    });
    if (built.status !== 0) throw new Error(`go build failed:\n${built.stderr}`);
    return binary;
  })();
  return goBinary;
}

/**
 * examples/postgres-rls's data API: accepted means 200 with the viewer's rows. It serves one
 * account: the subject it accepted is that account with the environment and id it answers.
 * The viewer it read is the id it answers and the regions of the rows its policy let through.
 */
function dataApiVerifier(url: () => string): Verifier {
  return {
    name: '@fastify/jwt (data API)',
    algorithms: ['ES256', 'RS256'],
    async run(tokens) {
      const outcomes: Outcome[] = [];
      for (const token of tokens) {
        const res = await fetch(`${url()}/orders`, { headers: { authorization: `Bearer ${token}` } });
        const body = (await res.json()) as {
          environment?: string;
          user_group_id?: string;
          viewer_id?: string | null;
          rows?: { region: string }[];
          error?: { code: string; message: string };
        };
        const regions = [...new Set(body.rows?.map((row) => row.region))].join('+');
        const viewer = body.viewer_id ? `${body.viewer_id}/${regions}` : undefined;
        outcomes.push(
          res.status === 200
            ? { accepted: true, sub: `${ACCOUNT}:${body.environment}:${body.user_group_id}`, viewer, detail: `${body.rows?.length} rows` }
            : { accepted: false, detail: `${res.status} ${body.error?.message}` },
        );
      }
      return outcomes;
    },
  };
}

// ---- the tokens ----

interface Case {
  name: string;
  token: string;
  /** Accepted by every verifier that implements this algorithm; undefined: refused by all. */
  acceptedAs?: EmbedSigningAlgorithm;
  /** The viewer every verifier that accepts it must read (`<id>/<region>`). */
  viewer?: string;
  /** The subject every verifier that accepts it must answer, when not SUBJECT. */
  sub?: string;
}

const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** The genuine tokens and every forgery, for the key that signs now. */
async function tokenCases(
  genuine: string,
  withViewer: string,
  otherEnvironment: string,
  otherAccount: string,
  otherAudience: string,
  previous: string | undefined,
  keySet: JSONWebKeySet,
  handle: DatabaseHandle,
  keyring: Keyring,
): Promise<Case[]> {
  const header = decodeProtectedHeader(genuine);
  const algorithm = header.alg as EmbedSigningAlgorithm;
  const claims = decodeJwt(genuine);
  const [encodedHeader, encodedPayload, encodedSignature] = genuine.split('.');
  const now = Math.floor(Date.now() / 1000);
  const signature = Buffer.from(encodedSignature, 'base64url');
  signature[signature.length >> 1] ^= 0x01;
  const published = keySet.keys.find((key) => key.kid === header.kid)!;
  const publicPem = await exportSPKI((await importJWK(published, algorithm)) as CryptoKey);
  const foreign = await generateKeyPair(algorithm, algorithm === 'EdDSA' ? { crv: 'Ed25519' } : {});
  const resign = (changes: Record<string, unknown>) => resignWithServiceKey(handle.db, keyring, genuine, changes);
  const [viewerHeader, , viewerSignature] = withViewer.split('.');
  const otherRegion = { ...decodeJwt(withViewer), ugs_viewer: { ...ADA, attributes: { region: 'amer' } } };
  return [
    { name: 'genuine', token: genuine, acceptedAs: algorithm },
    { name: 'genuine, with a viewer', token: withViewer, acceptedAs: algorithm, viewer: `${ADA.id}/${ADA.attributes.region}` },
    { name: 'genuine, of the same id in Testing', token: otherEnvironment, acceptedAs: algorithm, sub: `${ACCOUNT}:Testing:${VIEWER}` },
    { name: 'genuine, of another account with a group of the same id', token: otherAccount },
    ...(previous
      ? [{ name: 'of the key before the rotation', token: previous, acceptedAs: decodeProtectedHeader(previous).alg as EmbedSigningAlgorithm }]
      : []),
    { name: 'tampered payload', token: `${encodedHeader}.${b64({ ...claims, sub: 'globex' })}.${encodedSignature}` },
    { name: 'tampered viewer (another region)', token: `${viewerHeader}.${b64(otherRegion)}.${viewerSignature}` },
    { name: 'flipped signature bit', token: `${encodedHeader}.${encodedPayload}.${signature.toString('base64url')}` },
    { name: 'alg none', token: `${b64({ alg: 'none', typ: header.typ, kid: header.kid })}.${encodedPayload}.` },
    {
      name: 'HS256 keyed with the public key (PEM)',
      token: await new SignJWT(claims).setProtectedHeader({ ...header, alg: 'HS256' }).sign(Buffer.from(publicPem)),
    },
    {
      name: 'HS256 keyed with the public key (JWK)',
      token: await new SignJWT(claims).setProtectedHeader({ ...header, alg: 'HS256' }).sign(Buffer.from(JSON.stringify(published))),
    },
    { name: 'expired', token: await resign({ iat: now - 7200, nbf: now - 7200, exp: now - 3600 }) },
    { name: 'not yet valid', token: await resign({ iat: now, nbf: now + 3600, exp: now + 7200 }) },
    { name: 'wrong audience', token: otherAudience },
    { name: 'wrong issuer', token: await resign({ iss: 'https://attacker.example' }) },
    {
      name: 'unknown kid',
      token: await new SignJWT(claims).setProtectedHeader({ ...header, alg: algorithm, kid: 'not-a-published-key' }).sign(foreign.privateKey),
    },
  ];
}

/** One line per case: `accepted (sub)`, `accepted (sub, viewer id/region)` or `refused`; the same for what a verifier did and what it should. */
function matrixCell(outcome: Outcome): string {
  if (!outcome.accepted) return 'refused';
  return outcome.viewer === undefined ? `accepted (${outcome.sub})` : `accepted (${outcome.sub}, viewer ${outcome.viewer})`;
}

// ---- the suite ----

for (const backend of BACKENDS) {
  describe(`[${backend}] embed tokens and the verifiers customers run`, () => {
    let database: TestDatabase;
    let server: ServerProcess;
    let issuer: string;
    let env: Record<string, string>;
    let apiToken: string;
    let intruderToken: string;
    let handle: DatabaseHandle;
    let keyring: Keyring;
    let dataApi: DataApi | undefined;
    let previous: string | undefined;
    let goVerifierPath = '';

    // Pointed at the default key set, every verifier accepts the ES256 and RS256 tokens only,
    // EdDSA implemented or not: the set lists no EdDSA key (docs/api.md, "Keys"). Those that
    // implement EdDSA accept its tokens when pointed at the set that lists them (WITH_EDDSA).
    const DEFAULT_SET: readonly EmbedSigningAlgorithm[] = ['ES256', 'RS256'];
    const verifiers: Verifier[] = [
      nodeVerifier('jose', 'jose.mjs', DEFAULT_SET, () => issuer),
      nodeVerifier('jose (?alg=…,EdDSA)', 'jose.mjs', EMBED_SIGNING_ALGORITHMS, () => issuer, WITH_EDDSA),
      nodeVerifier('jsonwebtoken + jwks-rsa', 'jsonwebtoken.mjs', ['ES256', 'RS256'], () => issuer),
      nodeVerifier('fast-jwt + get-jwks (discovery)', 'fast-jwt.mjs', ['ES256', 'RS256'], () => issuer),
      ...(noDataApi ? [] : [dataApiVerifier(() => dataApi!.url)]),
      ...(noPyJwt
        ? []
        : [
            lineVerifier(
              'PyJWT (discovery)',
              DEFAULT_SET,
              () => [PYTHON, path.join(SNIPPETS, 'pyjwt.py')],
              () => issuer,
            ),
            lineVerifier(
              'PyJWT (?alg=…,EdDSA)',
              EMBED_SIGNING_ALGORITHMS,
              () => [PYTHON, path.join(SNIPPETS, 'pyjwt.py')],
              () => issuer,
              WITH_EDDSA,
            ),
          ]),
      ...(noGo
        ? []
        : [
            lineVerifier(
              'golang-jwt + go-jose',
              DEFAULT_SET,
              () => [goVerifierPath],
              () => issuer,
            ),
            lineVerifier(
              'golang-jwt + go-jose (?alg=…,EdDSA)',
              EMBED_SIGNING_ALGORITHMS,
              () => [goVerifierPath],
              () => issuer,
              WITH_EDDSA,
            ),
          ]),
    ];

    before(async () => {
      if (!noGo) goVerifierPath = await buildGoVerifier();
      database = await createTestDatabase(backend);
      const secretKey = crypto.randomBytes(32);
      keyring = new Keyring([secretKey]);
      // The port is fixed first, so that the issuer (http://HOST:PORT by default) is the
      // server's real address: verifiers find the keys from it. Nothing else is set: defaults.
      const port = await freePort();
      issuer = `http://127.0.0.1:${port}`;
      env = { DATABASE_URL: database.url, UGS_SECRET_KEY: secretKey.toString('base64') };
      server = await spawnServer({ ...env, PORT: String(port) });
      apiToken = (await issueTokenWithCli(env, ['--account', ACCOUNT, '--scopes', 'read,write'])).token;
      intruderToken = (await issueTokenWithCli(env, ['--account', INTRUDER, '--scopes', 'read,write'])).token;
      // The group in both environments of the account, and a group of the same id in another account.
      for (const [token, api_environment_tag] of [
        [apiToken, 'Customer'],
        [apiToken, 'Testing'],
        [intruderToken, 'Customer'],
      ]) {
        const created = await httpRequest(server.baseUrl, 'POST', '/api/user', {
          token,
          body: { user_group_id: VIEWER, api_environment_tag, properties: { region: 'emea' } },
        });
        assert.equal(created.status, 201, created.text);
      }
      // The test's own view of the database: the signing keys, to sign what the API never issues.
      handle = (await openMigratedDatabase({ databaseUrl: database.url })).handle;

      if (!noDataApi) dataApi = await startDataApi({ UGS_ISSUER: issuer, AUDIENCE, UGS_ACCOUNT: ACCOUNT });
    });

    after(async () => {
      await dataApi?.stop();
      await server?.stop();
      await handle?.close();
      await database?.drop();
    });

    async function mint(body: Record<string, unknown> = {}, token = apiToken): Promise<string> {
      const res = await httpRequest(server.baseUrl, 'POST', '/api/embed_token', {
        token,
        body: { user_group_id: VIEWER, expires_in_seconds: 600, ...body },
      });
      assert.equal(res.status, 200, res.text);
      return res.body.embed_token;
    }

    /** Rotates with the command-line tool (the new key signs at once) and waits for the server's copy of the key table to have it. */
    async function rotateTo(algorithm: EmbedSigningAlgorithm): Promise<void> {
      const rotated = await runUgs(['keys', 'embed', 'rotate', '--alg', algorithm, '--activate-in', '0s', '--json'], env);
      assert.equal(rotated.code, 0, rotated.stderr);
      const { kid } = JSON.parse(rotated.stdout) as { kid: string };
      for (let waited = 0; decodeProtectedHeader(await mint()).kid !== kid; waited += 200) {
        assert.ok(waited < GENEROUS_WAIT_MS, `the server did not sign with ${kid} within ${GENEROUS_WAIT_MS} ms`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }

    const states: { title: string; rotateTo?: EmbedSigningAlgorithm; publish?: EmbedSigningAlgorithm; signs: EmbedSigningAlgorithm }[] = [
      { title: 'a default deployment (ES256)', signs: 'ES256' },
      { title: 'after a rotation to a new ES256 key', rotateTo: 'ES256', signs: 'ES256' },
      { title: 'after a rotation to RS256', rotateTo: 'RS256', signs: 'RS256' },
      // The key set then holds an OKP key, which jwk-to-pem (get-jwks, Cube) cannot read: it must not reach the default set.
      { title: 'with an EdDSA key published that does not sign yet (--activate-in 1h)', publish: 'EdDSA', signs: 'RS256' },
      { title: 'after a rotation to EdDSA', rotateTo: 'EdDSA', signs: 'EdDSA' },
    ];
    for (const state of states) {
      it(`${state.title}: each verifier accepts the genuine tokens of the algorithms it implements, reads the subject and the viewer a token names, and refuses another account's token for the same id, a tampered payload or viewer, a flipped signature bit, alg none, HS256 keyed with the public key, an expired or not yet valid token, the wrong audience or issuer, and an unknown kid`, async (t) => {
        for (const [name, reason] of missingVerifiers) skippedPart(t, `the ${name} verifier`, reason);
        if (state.rotateTo) await rotateTo(state.rotateTo);
        if (state.publish) {
          const published = await runUgs(['keys', 'embed', 'rotate', '--alg', state.publish, '--activate-in', '1h', '--json'], env);
          assert.equal(published.code, 0, published.stderr);
        }
        const genuine = await mint();
        assert.equal(decodeProtectedHeader(genuine).alg, state.signs);
        const keySet = (await httpRequest(server.baseUrl, 'GET', WITH_EDDSA)).body as unknown as JSONWebKeySet;
        const withViewer = await mint({ viewer: ADA });
        const otherEnvironment = await mint({ api_environment_tag: 'Testing' });
        const otherAccount = await mint({}, intruderToken);
        const cases = await tokenCases(
          genuine,
          withViewer,
          otherEnvironment,
          otherAccount,
          await mint({ embed_id: 'finance' }),
          previous,
          keySet,
          handle,
          keyring,
        );
        previous = genuine;

        const expected: Record<string, Record<string, string>> = {};
        const actual: Record<string, Record<string, string>> = {};
        for (const verifier of verifiers) {
          const outcomes = await verifier.run(cases.map((c) => c.token));
          expected[verifier.name] = {};
          actual[verifier.name] = {};
          for (const [i, c] of cases.entries()) {
            const implemented = c.acceptedAs !== undefined && verifier.algorithms.includes(c.acceptedAs);
            expected[verifier.name][c.name] = implemented ? matrixCell({ accepted: true, sub: c.sub ?? SUBJECT, viewer: c.viewer }) : 'refused';
            actual[verifier.name][c.name] = matrixCell(outcomes[i]);
            t.diagnostic(`${verifier.name} | ${c.name}: ${matrixCell(outcomes[i])}${outcomes[i].detail ? ` — ${outcomes[i].detail.slice(0, 120)}` : ''}`);
          }
        }
        assert.deepEqual(actual, expected);
      });
    }
  });
}
