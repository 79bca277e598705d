// A dashboard session that outlives its embed tokens, in headless Chromium: a page on its own
// origin gets 60 s embed tokens (the shortest the service issues) from the customer's backend
// through @ugs/embed, and queries a real Cube (test/helpers/cube.ts, configured as
// docs/verify-embed-tokens.md says) through Cube's own browser client, and the service's
// embed context through the package's fetch, for minutes on end, many token lifetimes, with
// its clock 10 minutes off (one page behind, one ahead), and the backend answering one mint in
// the middle with 503 and Retry-After. Without PostgreSQL (Cube's rows), Cube is left out, loudly. Every query must succeed, every token be renewed before it expired on the
// server's clock, and the page keep its own state (never reloaded). The figures of the run
// go to test/artifacts/embed-session.json; docs/embedding.md, "A session of many tokens",
// keeps those of one run.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import * as esbuild from 'esbuild';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { ROOT, freePort, httpRequest, issueTokenWithCli, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { ARTIFACTS, launchChromium, missingBrowser, openContext } from './helpers/browser.ts';
import { CUBE_VERSION, cubeUnavailable, startCube, type CubeServer } from './helpers/cube.ts';
import { eventually } from './helpers/wait.ts';

const skip = missingBrowser('the embed session browser test');
const noCube = skip ? false : await cubeUnavailable();
if (noCube) {
  // CI has PostgreSQL and installs Cube (.ci/run): there, a missing Cube fails.
  assert.ok(!process.env.CI, `${noCube}; CI must run the session against Cube`);
  process.stderr.write(`\n${'!'.repeat(78)}\n!! SKIPPING Cube in the embed session (the service's context alone): ${noCube}\n${'!'.repeat(78)}\n\n`);
}
/** What the page asks Cube: the rows of examples/cube/schema.sql of acme's Customer group acme-corp. */
const CUBE_QUERY = { measures: ['Orders.count', 'Orders.total'] };
const CUBE_ANSWER = JSON.stringify([{ 'Orders.count': '3', 'Orders.total': '390' }]);

/** The shortest lifetime POST /api/embed_token accepts (docs/api.md, "The embed side"). */
const TOKEN_SECONDS = 60;
/** How long the pages query: five token lifetimes and a little more. */
const SESSION_MS = 5 * TOKEN_SECONDS * 1000 + 15_000;
/** The pause between one query and the next, on each page. */
const QUERY_EVERY_MS = 1_000;
/** When, in the session, the backend answers one mint of each page with 503. */
const FAILURE_AT_MS = SESSION_MS / 2;
const RETRY_AFTER_SECONDS = 3;
const EMBED_ID = 'sales-overview';
const MINUTE = 60_000;
const PAGES = [
  { name: 'behind', clockOffsetMs: -10 * MINUTE },
  { name: 'ahead', clockOffsetMs: 10 * MINUTE },
];

interface Mint {
  page: string;
  /** The backend's clock when it answered. */
  at: number;
  status: number;
  /** expires_at of the token, in milliseconds (200 only). */
  expiresAt?: number;
}

/**
 * The customer's backend: mints 60 s embed tokens for the page with its API token, answers with
 * Date exposed to the page, and, when told, refuses one mint of a page with 503 and Retry-After.
 */
async function startCustomerBackend(serviceUrl: string, apiToken: string, pageOrigin: string) {
  const mints: Mint[] = [];
  const failOnce = new Set<string>();
  const server = http.createServer(async (req, res) => {
    const cors = {
      'access-control-allow-origin': pageOrigin,
      'access-control-expose-headers': 'Date, Retry-After',
      vary: 'Origin',
      'cache-control': 'no-store',
      'content-type': 'application/json',
    };
    const url = new URL(req.url ?? '/', 'http://backend');
    const page = url.searchParams.get('page') ?? '';
    if (url.pathname !== '/embed-token') {
      res.writeHead(404, cors).end('{}');
      return;
    }
    if (failOnce.delete(page)) {
      mints.push({ page, at: Date.now(), status: 503 });
      res.writeHead(503, { ...cors, 'retry-after': String(RETRY_AFTER_SECONDS) }).end('{"error":"busy"}');
      return;
    }
    const minted = await fetch(`${serviceUrl}/api/embed_token`, {
      method: 'POST',
      headers: { authorization: `Token ${apiToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user_group_id: 'acme-corp', expires_in_seconds: TOKEN_SECONDS, embed_id: EMBED_ID, origin: pageOrigin }),
    });
    const body = (await minted.json()) as { embed_token: string; expires_at: string };
    mints.push({ page, at: Date.now(), status: minted.status, expiresAt: minted.ok ? Date.parse(body.expires_at) : undefined });
    if (!minted.ok) {
      res.writeHead(502, cors).end(JSON.stringify({ error: 'the service refused' }));
      return;
    }
    res.writeHead(200, cors).end(JSON.stringify({ embed_token: body.embed_token, expires_at: body.expires_at }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    mints,
    failOnce,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The page's script: @ugs/embed's source bundled with esbuild, with what it queries. */
const PAGE_SCRIPT = `
import cube from '@cubejs-client/core';
import { EmbedTokenSource } from './packages/embed/src/index.ts';

const config = window.SESSION_CONFIG;
const state = (window.sessionState = {
  id: crypto.randomUUID(),
  counter: 0,
  queries: 0,
  failed: 0,
  failures: [],
  retries: [],
  errors: [],
  lastGroup: null,
  cubeAnswers: [],
  stop: false,
  stopped: false,
});
const tokens = new EmbedTokenSource({
  // Each page names itself to the backend (?page=), so that each meets the one 503.
  backend: config.backendUrl + location.search,
  onRetry: ({ attempt, delayMs, error }) => state.retries.push({ attempt, delayMs, status: error.status ?? null }),
  onError: (error) => state.errors.push(String(error)),
});
window.tokens = tokens;
// Cube's own browser client, given the source's getToken: it asks for the token before each request.
const cubeApi = config.cubeApiUrl ? cube(tokens.getToken, { apiUrl: config.cubeApiUrl }) : null;
const $ = (id) => document.getElementById(id);

async function query(what, run) {
  state.queries++;
  try {
    await run();
  } catch (err) {
    state.failed++;
    state.failures.push({ what, at: state.counter, error: String(err && err.message ? err.message : err) });
  }
}

async function tick() {
  if (cubeApi) {
    await query('cube', async () => {
      const answer = JSON.stringify((await cubeApi.load(config.cubeQuery)).rawData());
      if (!state.cubeAnswers.includes(answer)) state.cubeAnswers.push(answer);
      state.cubeQueries = (state.cubeQueries ?? 0) + 1;
    });
  }
  await query('context', async () => {
    const response = await tokens.fetch(config.contextUrl);
    if (!response.ok) throw new Error('context: ' + response.status + ' ' + (await response.text()));
    state.lastGroup = (await response.json()).user_group.name;
  });
  state.counter++;
  $('counter').textContent = String(state.counter);
  $('group').textContent = state.lastGroup;
  $('cube').textContent = state.cubeAnswers.join(' ') || 'no Cube';
  $('queries').textContent = state.queries + ' queries, ' + state.failed + ' failed';
  $('tokens').textContent = tokens.stats.renewals + ' tokens received, ' + tokens.stats.retries + ' retries; ' + Math.round(tokens.remainingMs() / 1000) + ' s left';
}

(async () => {
  while (!state.stop) {
    await tick();
    await new Promise((resolve) => setTimeout(resolve, config.queryEveryMs));
  }
  state.stopped = true;
})();
`;

const PAGE_HTML = (config: object) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Embed session</title>
<style>body{font:15px/1.5 system-ui,sans-serif;margin:24px}dt{color:#6b7280}dd{margin:0 0 8px;font-weight:600}</style></head>
<body><h1>A dashboard session of many embed tokens</h1>
<dl><dt>page clock</dt><dd id="clock"></dd><dt>rounds of queries (the page's own counter)</dt><dd id="counter">0</dd>
<dt>group (the service's embed context, through the source's fetch)</dt><dd id="group"></dd>
<dt>Cube's answer (through Cube's client)</dt><dd id="cube"></dd><dt>queries</dt><dd id="queries"></dd><dt>embed tokens</dt><dd id="tokens"></dd></dl>
<script>window.SESSION_CONFIG = ${JSON.stringify(config)}; document.getElementById('clock').textContent = new Date().toISOString() + ' (the page\\'s Date)';</script>
<script type="module" src="/session.js"></script></body></html>`;

/**
 * Date as the page sees it: every Date of the page (now(), new Date()) runs `offsetMs` off.
 * A string, not a function: tsx's helpers in a serialized function do not exist in the page.
 */
function skewClock(offsetMs: number): string {
  return `{
    const RealDate = Date;
    class SkewedDate extends RealDate {
      constructor(...args) {
        if (args.length === 0) super(RealDate.now() + ${offsetMs});
        else super(...args);
      }
      static now() {
        return RealDate.now() + ${offsetMs};
      }
    }
    globalThis.Date = SkewedDate;
  }`;
}

interface PageState {
  id: string;
  counter: number;
  queries: number;
  failed: number;
  failures: { what: string; at: number; error: string }[];
  retries: { attempt: number; delayMs: number; status: number | null }[];
  errors: string[];
  lastGroup: string | null;
  cubeAnswers: string[];
  cubeQueries?: number;
  stopped: boolean;
}

describe('a dashboard session that outlives its embed tokens, in headless Chromium', { skip }, () => {
  let database: TestDatabase;
  let service: ServerProcess;
  let cubeServer: CubeServer | undefined;
  let backend: Awaited<ReturnType<typeof startCustomerBackend>>;
  let pageServer: http.Server;
  let browser: Browser;
  const contexts: BrowserContext[] = [];

  before(async () => {
    const bundle = await esbuild.build({
      stdin: { contents: PAGE_SCRIPT, resolveDir: ROOT, loader: 'js' },
      bundle: true,
      format: 'esm',
      target: 'es2022',
      write: false,
      logLevel: 'silent',
    });
    let config: object = {};
    pageServer = http.createServer((req, res) => {
      const { pathname } = new URL(req.url ?? '/', 'http://page');
      if (pathname === '/session.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle.outputFiles[0].text);
      else if (pathname === '/') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE_HTML(config));
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
    const pageOrigin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;

    database = await createTestDatabase('sqlite');
    const secretKey = crypto.randomBytes(32).toString('base64');
    service = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: secretKey, UGS_CORS_ORIGINS: pageOrigin, PORT: String(await freePort()) });
    const { token } = await issueTokenWithCli({ DATABASE_URL: database.url, UGS_SECRET_KEY: secretKey }, ['--account', 'acme', '--scopes', 'read,write']);
    const created = await httpRequest(service.baseUrl, 'POST', '/api/user', { token, body: { user_group_id: 'acme-corp', name: 'ACME Corporation' } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    backend = await startCustomerBackend(service.baseUrl, token, pageOrigin);
    if (!noCube) {
      // As docs/verify-embed-tokens.md, "Cube", configures it: the service's issuer (its real
      // address) and key set, the dashboard's embed_id as the audience.
      cubeServer = await startCube({ jwksUrl: `${service.baseUrl}/.well-known/jwks.json`, issuer: service.baseUrl, audience: EMBED_ID });
    }
    config = {
      backendUrl: `${backend.url}/embed-token`,
      contextUrl: `${service.baseUrl}/api/embed/context?embed_id=${EMBED_ID}`,
      cubeApiUrl: cubeServer ? `${cubeServer.url}/cubejs-api/v1` : null,
      cubeQuery: CUBE_QUERY,
      queryEveryMs: QUERY_EVERY_MS,
    };
    browser = await launchChromium();
  });

  after(async () => {
    await browser?.close();
    await backend?.close();
    await cubeServer?.stop();
    await new Promise((resolve) => pageServer?.close(resolve));
    await service?.stop();
    await database?.drop();
  });

  // The session itself lasts five of the shortest token lifetimes (over 5 minutes), and waits
  // for nothing else: within the runner's one bound (test/run-tests.ts).
  it('embed session: five 60 s token lifetimes, the page clock 10 minutes behind or ahead, one 503 mint: 0 failed queries, every token renewed before it expired, the page never reloaded', async () => {
    const pageOrigin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
    const pages: { name: string; page: Page; navigations: number; initialId: string }[] = [];
    for (const { name, clockOffsetMs } of PAGES) {
      const context = await openContext(browser, { viewport: { width: 800, height: 420 } });
      contexts.push(context);
      await context.addInitScript(skewClock(clockOffsetMs));
      const page = await context.newPage();
      const entry = { name, page, navigations: 0, initialId: '' };
      page.on('framenavigated', (frame) => {
        if (frame === page.mainFrame()) entry.navigations++;
      });
      await page.goto(`${pageOrigin}/?page=${name}`);
      pages.push(entry);
    }
    for (const entry of pages) {
      entry.initialId = await eventually(`the ${entry.name} page answering its first query`, () =>
        entry.page.evaluate(() => {
          const state = (window as unknown as { sessionState?: PageState }).sessionState;
          return state && state.counter > 0 ? state.id : '';
        }),
      );
      const skew = (await entry.page.evaluate(() => Date.now())) - Date.now();
      const expected = PAGES.find((p) => p.name === entry.name)!.clockOffsetMs;
      assert.ok(Math.abs(skew - expected) < 5_000, `the ${entry.name} page's clock is ${Math.round(skew / 1000)} s off`);
    }

    const started = Date.now();
    await new Promise((resolve) => setTimeout(resolve, FAILURE_AT_MS));
    for (const { name } of PAGES) backend.failOnce.add(name);
    await new Promise((resolve) => setTimeout(resolve, SESSION_MS - FAILURE_AT_MS));
    const sessionMs = Date.now() - started;

    const figures: Record<string, unknown> = {
      cube: cubeServer ? CUBE_VERSION : null,
      token_seconds: TOKEN_SECONDS,
      session_seconds: Math.round(sessionMs / 1000),
      pages: {},
    };
    for (const entry of pages) {
      const { page, name } = entry;
      await page.evaluate(() => {
        (window as unknown as { sessionState: { stop: boolean } }).sessionState.stop = true;
      });
      const state = await eventually(`the ${name} page finishing its last query`, () =>
        page.evaluate(() => {
          const s = (window as unknown as { sessionState: PageState }).sessionState;
          return s.stopped ? s : null;
        }),
      );
      const stats = await page.evaluate(() => (window as unknown as { tokens: { stats: object } }).tokens.stats);
      await page.screenshot({ path: path.join(ARTIFACTS, `embed-session-${name}.png`) });
      const minted = backend.mints.filter((m) => m.page === name);
      const tokens = minted.filter((m) => m.status === 200);

      assert.deepEqual(state.failures, [], `the ${name} page: every query answered`);
      assert.equal(state.failed, 0);
      assert.equal(entry.navigations, 1, `the ${name} page was never reloaded`);
      assert.equal(state.id, entry.initialId, `the ${name} page kept its own state`);
      assert.equal(state.counter * (cubeServer ? 2 : 1), state.queries, "the page's counter counted every round of queries");
      assert.equal(state.lastGroup, 'ACME Corporation');
      if (cubeServer) {
        assert.deepEqual(state.cubeAnswers, [CUBE_ANSWER], `${name}: Cube answered the group's rows, and the same at every query`);
        assert.ok((state.cubeQueries ?? 0) > 0);
      }
      assert.deepEqual(
        minted.filter((m) => m.status !== 200).map((m) => m.status),
        [503],
        `the ${name} page met the one failed mint`,
      );
      assert.deepEqual(
        state.retries.map((r) => [r.status, r.delayMs]),
        [[503, RETRY_AFTER_SECONDS * 1000]],
        'retried once, after the Retry-After',
      );
      assert.deepEqual(state.errors, [], 'no renewal gave up');
      // Renewed before each token expired (on the server's clock), but not long before: a clock
      // 10 minutes ahead does not renew at every query, one behind does not wait past expiry.
      for (let i = 1; i < tokens.length; i++) {
        const left = tokens[i - 1].expiresAt! - tokens[i].at;
        assert.ok(left > 0, `${name}: token ${i + 1} minted ${-left} ms after token ${i} expired`);
        assert.ok(left <= 20_000, `${name}: token ${i + 1} minted ${left} ms before token ${i} expired: too early`);
      }
      const lifetimes = sessionMs / (TOKEN_SECONDS * 1000);
      assert.ok(tokens.length >= Math.floor(lifetimes), `${name}: ${tokens.length} tokens over ${lifetimes.toFixed(1)} lifetimes`);
      (figures.pages as Record<string, unknown>)[name] = {
        clock_offset_seconds: Math.round(PAGES.find((p) => p.name === name)!.clockOffsetMs / 1000),
        token_lifetimes_covered: Number(lifetimes.toFixed(1)),
        tokens_received: tokens.length,
        renewals: tokens.length - 1,
        failed_mints: minted.length - tokens.length,
        retries: state.retries.length,
        queries: state.queries,
        cube_queries: state.cubeQueries ?? 0,
        context_queries: state.queries - (state.cubeQueries ?? 0),
        failed_queries: state.failed,
        navigations: entry.navigations,
        page_counter: state.counter,
        source_stats: stats,
        least_left_at_renewal_seconds: Math.min(...tokens.slice(1).map((t, i) => (tokens[i].expiresAt! - t.at) / 1000)),
      };
    }
    fs.writeFileSync(path.join(ARTIFACTS, 'embed-session.json'), `${JSON.stringify(figures, null, 2)}\n`);
    process.stdout.write(`embed session figures: ${JSON.stringify(figures)}\n`);
  });
});
