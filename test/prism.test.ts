// The OpenAPI document as a tool nobody on this project wrote reads it: Stoplight Prism's
// validation proxy (a dev dependency) in front of a fresh server process, started as the README
// starts it. Through the proxy go every curl example of README.md and docs/api.md, in order, as
// test/readme.test.ts runs them (test/helpers/walk-through.ts), then every operation of the
// document: its own curl sample, and its error cases (no token, a token without the scope, a
// body or query the operation refuses, an id that names nothing). Prism checks each request
// against the document and each answer against what the document declares for its status, and
// names every mismatch in an `sl-violations` header and its log.
//
// Prism runs without --errors: with it, Prism answers a request the document calls invalid
// itself (422, 401), so the server's own answer to the docs' deliberate mistakes would never be
// checked. Instead the test fails on every violation, except a request violation that is the
// documented refusal itself: the missing token of a 401, the unknown field of a 400, the
// undocumented path of a 404 or 405. Any answer Prism gives itself (application/problem+json)
// fails too, but one: Prism cannot forward a GET with a body (docs/api.md, "Requests": get-or-create
// takes one); those examples go straight to the server, and the test checks that Prism still
// refuses them, so that the exception goes once it can.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT, httpRequest, reapOnExit, spawnServer, freePort, type ServerProcess } from './helpers/processes.ts';
import { WalkThrough, runStep, walkThroughSteps, type CurlAnswer } from './helpers/walk-through.ts';
import { Receiver } from './helpers/webhook-receiver.ts';
import { eventually } from './helpers/wait.ts';

const PRISM = path.join(ROOT, 'node_modules', '.bin', 'prism');
/** Prism compiles the whole document before it listens: seconds here, more on a busy machine. */
const PRISM_START_MS = 180_000;
/** The response headers each curl prints: Prism's findings, and whether Prism answered itself. */
const HEADERS = ['sl-violations', 'content-type'];

interface Violation {
  location: string[];
  severity: string;
  code?: number | string;
  message: string;
}

// biome-ignore lint/suspicious/noExplicitAny: an OpenAPI document, walked by path
type Json = Record<string, any>;
interface Operation {
  method: string;
  path: string;
  operation: Json;
}

interface PrismProcess {
  url: string;
  child: ChildProcess;
  /** What Prism logged so far. */
  log: () => string;
  stop: () => Promise<void>;
}

/** Prism's validation proxy for `documentFile` in front of `upstream`, once it listens. */
async function startPrism(documentFile: string, upstream: string): Promise<PrismProcess> {
  const port = await freePort();
  const child = reapOnExit(
    spawn(PRISM, ['proxy', documentFile, upstream, '--host', '127.0.0.1', '--port', String(port), '--cors=false', '--errors=false'], {
      env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let log = '';
  child.stdout!.on('data', (chunk) => (log += chunk));
  child.stderr!.on('data', (chunk) => (log += chunk));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  await eventually(
    () => `Prism listening on port ${port}:\n${log}`,
    () => {
      assert.equal(child.exitCode, null, `Prism exited:\n${log}`);
      return /Prism is listening on/.test(log);
    },
    { timeoutMs: PRISM_START_MS, everyMs: 200 },
  );
  return { url: `http://127.0.0.1:${port}`, child, log: () => log, stop };
}

/** A request of the docs that Prism's forwarder cannot send: a GET with a body. */
const isGetWithBody = (command: string) => /-X GET\b/.test(command) && /\s(-d|--data\S*)\s/.test(command);

/** Whether a request violation is the refusal the answer documents (see the top of this file). */
function isTheDocumentedRefusal(status: number, violation: Violation): boolean {
  if (violation.code === 401) return status === 401;
  if (violation.message === 'Selected route not found') return status === 404 || status === 405;
  return status === 400 || status === 413 || status === 415;
}

describe("Stoplight Prism's validation proxy in front of the server", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-prism-'));
  fs.cpSync(path.join(ROOT, 'examples'), path.join(dir, 'examples'), { recursive: true, filter: (source) => !source.includes('node_modules') });
  fs.mkdirSync(path.join(dir, 'home'));
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: path.join(dir, 'home'), DATABASE_URL: '', UGS_KEY_FILE: '', UGS_SECRET_KEY: '' };
  const printed: string[] = [];
  const receiver = new Receiver();
  let server: ServerProcess;
  let prism: PrismProcess;
  let prismUrl = '';
  let document: Json;
  /** Every answer that came through Prism, and what was wrong with it. */
  const checked: CurlAnswer[] = [];
  const problems: string[] = [];
  let violationsSeen = 0;
  /** The docs' requests that went straight to the server (Prism cannot forward them). */
  const direct: string[] = [];

  /** Records what Prism found in one answer; `status` is the answer the request is meant to get (one of them). */
  function check(answer: CurlAnswer, status: number | number[]): void {
    checked.push(answer);
    const where = `${answer.command}\n  -> ${answer.status} ${answer.answer.slice(0, 300)}`;
    if (![status].flat().includes(answer.status)) problems.push(`answered ${answer.status}, not ${status}: ${where}`);
    if (/^application\/problem\+json/.test(answer.headers['content-type'] ?? '')) problems.push(`Prism answered this request itself: ${where}`);
    const header = answer.headers['sl-violations'] ?? '';
    if (!header) return;
    if (!header.startsWith('[')) {
      problems.push(`${header.slice(0, 300)}: ${where}`);
      return;
    }
    const violations = JSON.parse(header) as Violation[];
    violationsSeen += violations.length;
    for (const violation of violations) {
      const request = violation.location[0] === 'request';
      if (request && isTheDocumentedRefusal(answer.status, violation)) continue;
      if (!request && violation.severity !== 'Error') continue;
      problems.push(`${violation.severity}: ${violation.location.join('.')} ${violation.message}: ${where}`);
    }
  }

  /** One curl command through Prism, meant to answer `status`. */
  async function send(command: string, status: number | number[]): Promise<CurlAnswer> {
    const result = await runStep(command, { ...env, UGS: prismUrl }, dir, HEADERS);
    assert.equal(result.code, 0, `${command}\n${result.stdout}\n${result.stderr}`);
    const lines = result.stdout.trimEnd().split('\n');
    const code = Number(lines.pop());
    const [violations, contentType] = lines.splice(lines.length - HEADERS.length, HEADERS.length);
    const answer = { command, status: code, answer: lines.join('\n'), headers: { 'sl-violations': violations, 'content-type': contentType } };
    check(answer, status);
    return answer;
  }

  const walkThrough = new WalkThrough(env, dir, printed, {
    headers: HEADERS,
    envFor: (command) => {
      if (!isGetWithBody(command)) return undefined;
      direct.push(command);
      return { UGS: server.baseUrl };
    },
    onAnswer: (answer) => {
      if (direct.includes(answer.command)) return;
      // A step the page shows no answer for must succeed.
      check(answer, answer.expect?.status ?? (answer.status < 300 ? answer.status : 200));
    },
  });

  before(async () => {
    await receiver.start();
    // As `npm start` in the checkout; webhooks may go to the test's own receiver on 127.0.0.1.
    server = await spawnServer(
      { DATABASE_URL: 'sqlite:./data/ugs.sqlite', UGS_KEY_FILE: '', UGS_SECRET_KEY: '', UGS_BOOTSTRAP: 'true', UGS_WEBHOOK_ALLOW_PRIVATE: 'true' },
      { cwd: dir },
    );
    await server.waitForOutput(/"msg":"started"/);
    printed.push(server.output());
    const served = await httpRequest(server.baseUrl, 'GET', '/openapi.json');
    assert.equal(served.status, 200);
    document = served.body as Json;
    const file = path.join(dir, 'openapi.json');
    fs.writeFileSync(file, served.text);

    prism = await startPrism(file, server.baseUrl);
    prismUrl = prism.url;
    env.UGS = prismUrl;
  });
  after(async () => {
    await prism?.stop();
    await server?.stop();
    await receiver.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('README.md and docs/api.md: every curl example, in order, through Prism: no violation, no refusal', async (t) => {
    await walkThrough.walk('README.md');
    await walkThrough.walk('docs/api.md');
    const curls = ['README.md', 'docs/api.md'].flatMap((file) => walkThroughSteps(file)).filter((step) => step.command.startsWith('curl '));
    assert.equal(checked.length + direct.length, curls.length);
    assert.ok(checked.length >= 25, `${checked.length} examples went through Prism`);
    assert.deepEqual(problems, [], `${problems.length} of ${checked.length} answers`);
    t.diagnostic(`${checked.length} examples through Prism, ${direct.length} straight to the server (GET with a body)`);
  });

  it('the examples Prism cannot forward are GETs with a body, which Prism still refuses (drop the exception once it forwards them)', async () => {
    assert.ok(direct.length > 0 && direct.every(isGetWithBody), direct.join('\n'));
    const result = await runStep(direct[0], { ...env, UGS: prismUrl }, dir, HEADERS);
    assert.match(result.stdout, /PROXY_UNSUPPORTED_REQUEST_BODY/);
  });

  it('every operation of the document: its curl sample and its error cases, through Prism: no violation, no refusal', async (t) => {
    const before = checked.length;
    const operations: Operation[] = Object.entries(document.paths as Record<string, Json>).flatMap(([path, item]) =>
      Object.entries(item as Json).map(([method, operation]) => ({ method, path, operation: operation as Json })),
    );
    assert.equal(operations.length, 34);
    // The first-start token: every scope.
    const bootstrap = /^\s+(ugs_api_\w+)$/m.exec(server.output())![1];
    Object.assign(env, { TOKEN: bootstrap, ADMIN_TOKEN: bootstrap, UGS_TOKEN: bootstrap });
    const readOnly = await send(
      `curl -s -X POST "$UGS/api/api_tokens" -H "Authorization: Token $TOKEN" -H 'Content-Type: application/json' -d '{"name": "read only", "scopes": ["read"]}'`,
      201,
    );
    const readToken = JSON.parse(readOnly.answer).token as string;
    const revocable = await send(
      `curl -s -X POST "$UGS/api/api_tokens" -H "Authorization: Token $TOKEN" -H 'Content-Type: application/json' -d '{"name": "to revoke", "scopes": ["read"]}'`,
      201,
    );
    const revocableId = JSON.parse(revocable.answer).api_token.id as number;
    const endpoint = await send(
      `curl -s -X POST "$UGS/api/webhook_endpoints" -H "Authorization: Token $TOKEN" -H 'Content-Type: application/json' -d '{"url": "${receiver.url}", "types": ["user_group.deleted"]}'`,
      201,
    );
    const endpointId = JSON.parse(endpoint.answer).webhook_endpoint.id as number;

    /** The operation's curl sample, on this server: its ids the ones made above, its webhook URL the receiver's. */
    const sample = ({ operation }: Operation) => {
      const source = (operation['x-codeSamples'] as Json[]).find((s) => s.label === 'curl')!.source as string;
      return source
        .replace(/\\\n\s*/g, '')
        .replace(/\/api\/api_tokens\/\d+/, `/api/api_tokens/${revocableId}`)
        .replace(/\/api\/webhook_endpoints\/\d+/, `/api/webhook_endpoints/${endpointId}`)
        .replace('https://example.com/ugs-webhooks', receiver.url)
        .replace(/^curl /, 'curl -s ');
    };
    const successesOf = ({ operation }: Operation) =>
      Object.keys(operation.responses)
        .filter((status) => status.startsWith('2'))
        .map(Number);
    /** The scope an operation names, if any (a read-only token lacks write and admin). */
    const scopeOf = ({ operation }: Operation) => Object.values((operation.security as Json[])[0] ?? {})[0]?.[0] as string | undefined;

    // What a sample assumes that the docs' walk-through changed: the tags it names.
    const tagsCommand = (method: string, body: string) =>
      `curl -s -X ${method} "$UGS/api/group_tags${method === 'DELETE' ? `?name=${body}` : ''}" -H "Authorization: Token $TOKEN"${method === 'POST' ? ` -H 'Content-Type: application/json' -d '{"name": "${body}"}'` : ''}`;
    const prepare: Record<string, [string, number][]> = {
      'post /api/group_tags': [[tagsCommand('DELETE', 'enterprise'), 200]],
      'post /api/group_tags/rename': [[tagsCommand('POST', 'beta'), 201]],
      'delete /api/group_tags': [[tagsCommand('POST', 'beta'), 201]],
    };
    // The samples: removals last, so that what they remove was there for the rest.
    const ordered = [...operations].sort((a, b) => Number(a.method === 'delete') - Number(b.method === 'delete'));
    for (const op of ordered) {
      if (op.path === '/api/events/stream') continue; // lasts until the client hangs up: its error cases below
      for (const [command, status] of prepare[`${op.method} ${op.path}`] ?? []) await send(command, status);
      await send(sample(op), successesOf(op));
    }

    for (const op of operations) {
      const secured = (op.operation.security as Json[]).length > 0;
      const withoutCredentials = sample(op).replace(/ -H "Authorization: [^"]*"/, '');
      if (secured) await send(withoutCredentials, 401);
      const scope = scopeOf(op);
      if (scope === 'write' || scope === 'admin') await send(sample(op).replace(/\$(ADMIN_|UGS_)?TOKEN\b/, readToken), 403);
      if (op.path.includes('{id}')) await send(sample(op).replace(/\/(\d+)(\/|\?|"|$)/, '/987654$2'), 404);
      const body = op.operation.requestBody?.content?.['application/json'];
      if (body && op.method !== 'get' && op.method !== 'delete' && scope !== undefined) {
        const token = `-H "Authorization: Token $TOKEN"`;
        await send(
          `curl -s -X ${op.method.toUpperCase()} "$UGS${op.path}" ${token} -H 'Content-Type: application/json' -d '{"not_a_field": 1}'`.replace(
            '{id}',
            String(endpointId),
          ),
          400,
        );
      }
    }
    assert.ok(checked.length - before >= 34 * 2, `${checked.length - before} requests`);
    assert.deepEqual(problems, [], `${problems.length} of ${checked.length} answers`);
    t.diagnostic(
      `${checked.length - before} requests over the ${operations.length} operations; ${checked.length} in all, ${violationsSeen} violations that were the documented refusal`,
    );
  });

  it("Prism's log names no violation that the answers' sl-violations did not", async () => {
    const logged = () => prism.log().match(/Violation: /g)?.length ?? 0;
    await eventually(
      () => `Prism's log naming the ${violationsSeen} violations of the answers (it names ${logged()})`,
      () => logged() >= violationsSeen,
    );
    assert.equal(logged(), violationsSeen);
  });

  it("Prism does check the answers: with a document that declares a group's name an integer, the same call is a violation", async () => {
    const broken = structuredClone(document);
    broken.components.schemas.UserGroup.properties.name = { type: 'integer' };
    const file = path.join(dir, 'openapi-broken.json');
    fs.writeFileSync(file, JSON.stringify(broken));
    const strict = await startPrism(file, server.baseUrl);
    try {
      const result = await runStep(
        `curl -s "$UGS/api/user/lookup?user_group_id=example_1" -H "Authorization: Token $TOKEN"`,
        { ...env, UGS: strict.url },
        dir,
        HEADERS,
      );
      assert.match(result.stdout, /"location":\["response","body","user_group","name"\]/);
    } finally {
      await strict.stop();
    }
  });
});
