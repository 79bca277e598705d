// @ugs/embed, the browser's token source (packages/embed). First on a fake clock, which the
// package takes as an option, with a scripted backend of the customer (a function answering
// Responses, as the package lets a page pass its own): renewal on the server's clock whatever
// the browser's says, one renewal for concurrent callers, Retry-After, backoff, no failure
// kept, the page told. Then against a real service through examples/embed-demo/backend.mjs.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  EmbedTokenError,
  EmbedTokenSource,
  embedFetch,
  type EmbedSession,
  type EmbedTokenRetry,
  type EmbedTokenSourceOptions,
} from '../packages/embed/src/index.ts';
import { ROOT, httpRequest, runNode, startExample, stopExample, useServerProcesses, type ExampleProcess } from './helpers/processes.ts';

const MINUTE = 60_000;
// The demo backend binds its tokens to the page's origin (its default PAGE_ORIGIN), which a browser would send.
const FROM_PAGE = { headers: { origin: 'http://127.0.0.1:8081' } };

/** Time that moves only when told, with the timers due in it. */
class FakeClock {
  time = Date.parse('2026-03-01T12:00:00Z');
  #timers = new Map<number, { at: number; callback: () => void }>();
  #next = 1;
  readonly setTimeout = (callback: () => void, ms: number): number => {
    const id = this.#next++;
    this.#timers.set(id, { at: this.time + ms, callback });
    return id;
  };
  readonly clearTimeout = (id: unknown): void => {
    this.#timers.delete(id as number);
  };
  /** Moves time on by `ms`, running each timer due on the way at its own moment. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      await settle();
      const due = [...this.#timers].filter(([, t]) => t.at <= end).sort(([, a], [, b]) => a.at - b.at)[0];
      if (!due) break;
      this.#timers.delete(due[0]);
      this.time = Math.max(this.time, due[1].at);
      due[1].callback();
    }
    this.time = end;
    await settle();
  }
}

/** Lets promise chains (reading a Response's body included) run to their end. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}

interface Call {
  at: number;
}

/**
 * The customer's backend, scripted: each call takes the next answer (a status, or a token),
 * stamped with the server's time (the fake clock's, whatever the browser's clock says).
 */
function scriptedBackend(clock: FakeClock, script: Array<number | { status: number; retryAfter?: string } | 'token' | 'hang'> = []) {
  const calls: Call[] = [];
  let minted = 0;
  const lifetimeSeconds = { value: 60 };
  const backend = async ({ signal }: { signal: AbortSignal }): Promise<Response> => {
    calls.push({ at: clock.time });
    const step = script.shift() ?? 'token';
    const date = new Date(clock.time).toUTCString();
    if (step === 'hang') {
      return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
    }
    if (step !== 'token') {
      const { status, retryAfter } = typeof step === 'number' ? { status: step, retryAfter: undefined } : step;
      const headers: Record<string, string> = { date, 'content-type': 'application/json' };
      if (retryAfter !== undefined) headers['retry-after'] = retryAfter;
      return new Response(JSON.stringify({ error: 'no' }), { status, headers });
    }
    minted++;
    // expires_at is whole seconds, as the service answers it.
    const expiresAt = new Date(Math.floor(clock.time / 1000) * 1000 + lifetimeSeconds.value * 1000).toISOString().replace('.000Z', 'Z');
    return new Response(JSON.stringify({ embed_token: `token-${minted}`, expires_at: expiresAt, embed_id: 'sales-overview' }), {
      status: 200,
      headers: { date, 'content-type': 'application/json' },
    });
  };
  return { backend, calls, lifetimeSeconds };
}

function sourceOn(clock: FakeClock, backend: EmbedTokenSourceOptions['backend'], options: Partial<EmbedTokenSourceOptions> & { skewMs?: number } = {}) {
  const { skewMs = 0, ...rest } = options;
  return new EmbedTokenSource({
    backend,
    now: () => clock.time + skewMs, // the browser's clock: off by skewMs from the server's
    setTimeout: clock.setTimeout,
    clearTimeout: clock.clearTimeout,
    random: () => 0.5,
    ...rest,
  });
}

function events(source: EmbedTokenSource) {
  const seen = { renew: [] as EmbedSession[], retry: [] as EmbedTokenRetry[], error: [] as EmbedTokenError[] };
  source.addEventListener('renew', (e) => seen.renew.push((e as CustomEvent<EmbedSession>).detail));
  source.addEventListener('retry', (e) => seen.retry.push((e as CustomEvent<EmbedTokenRetry>).detail));
  source.addEventListener('error', (e) => seen.error.push((e as CustomEvent<EmbedTokenError>).detail));
  return seen;
}

describe('@ugs/embed on a fake clock', () => {
  it('embed package: the first getToken asks the backend; while the token is fresh the same one is answered without asking again', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock);
    const source = sourceOn(clock, backend, { autoRenew: false });
    assert.equal(await source.getToken(), 'token-1');
    await clock.advance(30_000);
    assert.equal(await source.getToken(), 'token-1');
    assert.equal(calls.length, 1);
    assert.equal(source.current?.clock, 'date');
    assert.equal(source.current?.lifetimeMs, MINUTE);
    assert.deepEqual(source.current?.answer.embed_id, 'sales-overview', "the backend's other fields come along");
  });

  for (const skewMs of [-10 * MINUTE, 0, 10 * MINUTE]) {
    it(`embed package: with the browser's clock ${skewMs / MINUTE} minutes off, renewal comes at three quarters of the token's lifetime on the server's clock`, async () => {
      const clock = new FakeClock();
      const { backend, calls } = scriptedBackend(clock);
      const source = sourceOn(clock, backend, { skewMs });
      const seen = events(source);
      const start = clock.time;
      assert.equal(await source.getToken(), 'token-1');
      // Lifetime 60 s, counted as 59 (a second less for the whole seconds): renewal 15 s (a quarter) before.
      await clock.advance(43_000);
      assert.equal(calls.length, 1, 'not renewed early (a clock ahead would see the token already expired)');
      await clock.advance(1_000);
      assert.equal(calls.length, 2, 'renewed on the timer before the token expired (a clock behind would see it valid far too long)');
      assert.equal(calls[1].at - start, 44_000);
      assert.equal(await source.getToken(), 'token-2');
      // Many lifetimes on: one renewal per 44 s, whatever the skew.
      await clock.advance(10 * MINUTE);
      assert.equal(calls.length, 2 + Math.floor((10 * MINUTE) / 44_000));
      assert.equal(seen.renew.length, calls.length);
      assert.equal(seen.error.length, 0);
      source.close();
    });
  }

  it('embed package: twenty concurrent callers, at the start and at expiry, share one request to the backend', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock);
    const source = sourceOn(clock, backend, { autoRenew: false });
    const first = await Promise.all(Array.from({ length: 20 }, () => source.getToken()));
    assert.deepEqual(new Set(first), new Set(['token-1']));
    assert.equal(calls.length, 1);
    await clock.advance(58_000); // less than the 5 s of minimum validity left: callers wait for the renewal
    const second = await Promise.all(Array.from({ length: 20 }, () => source.getToken()));
    assert.deepEqual(new Set(second), new Set(['token-2']));
    assert.equal(calls.length, 2);
    // Twenty requests refused with the same token renew it once.
    const renewed = await Promise.all(Array.from({ length: 20 }, () => source.renew('token-2')));
    assert.deepEqual(new Set(renewed.map((s) => s.token)), new Set(['token-3']));
    assert.equal(calls.length, 3);
    // A refused token that is no longer the one held renews nothing.
    assert.equal((await source.renew('token-1')).token, 'token-3');
    assert.equal(calls.length, 3);
  });

  it('embed package: within the renewal window the held token is answered at once and the renewal runs behind it', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock);
    const source = sourceOn(clock, backend, { autoRenew: false });
    await source.getToken();
    await clock.advance(50_000);
    assert.equal(await source.getToken(), 'token-1', 'still 9 s left: usable');
    await settle();
    assert.equal(calls.length, 2);
    assert.equal(await source.getToken(), 'token-2');
  });

  it('embed package: a 503 with Retry-After is asked again only after the Retry-After, and the caller gets the token', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock, [{ status: 503, retryAfter: '7' }, 'token']);
    const source = sourceOn(clock, backend, { autoRenew: false });
    const seen = events(source);
    let token: string | undefined;
    void source.getToken().then((t) => {
      token = t;
    });
    await clock.advance(6_900);
    assert.equal(calls.length, 1, 'not before the Retry-After');
    assert.equal(token, undefined);
    await clock.advance(100);
    assert.equal(calls.length, 2);
    assert.equal(token, 'token-1');
    assert.equal(seen.retry.length, 1);
    assert.equal(seen.retry[0].delayMs, 7_000);
    assert.equal(seen.error.length, 0);
    assert.deepEqual(source.stats, { renewals: 1, retries: 1, failedRenewals: 0 });
  });

  it("embed package: a Retry-After HTTP date is counted from the answer's Date, not from a browser clock 10 minutes behind", async () => {
    const clock = new FakeClock();
    const retryAt = new Date(clock.time + 12_000).toUTCString();
    const { backend, calls } = scriptedBackend(clock, [{ status: 429, retryAfter: retryAt }, 'token']);
    const source = sourceOn(clock, backend, { autoRenew: false, skewMs: -10 * MINUTE });
    const seen = events(source);
    const pending = source.getToken();
    await clock.advance(12_000);
    assert.equal(await pending, 'token-1');
    assert.equal(seen.retry[0].delayMs, 12_000);
    assert.equal(calls[1].at - calls[0].at, 12_000);
  });

  it('embed package: without Retry-After, the waits between attempts double (half of each random), up to maxDelayMs', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock, [502, 504, 500, 'token']);
    const source = sourceOn(clock, backend, { autoRenew: false, baseDelayMs: 1_000, maxDelayMs: 3_000 });
    const seen = events(source);
    const pending = source.getToken();
    await clock.advance(20_000);
    assert.equal(await pending, 'token-1');
    // random() is 0.5: three quarters of 1 s, 2 s, then the 3 s ceiling.
    assert.deepEqual(
      seen.retry.map((r) => r.delayMs),
      [750, 1_500, 2_250],
    );
    assert.deepEqual(
      calls.map((c) => c.at - calls[0].at),
      [0, 750, 2_250, 4_500],
    );
  });

  it('embed package: a refusal of the backend (401) is not retried, rejects getToken, tells the page, and is not kept: the next call asks again', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock, [401, 'token']);
    const errors: EmbedTokenError[] = [];
    const source = sourceOn(clock, backend, { autoRenew: false, onError: (error) => errors.push(error) });
    const seen = events(source);
    await assert.rejects(source.getToken(), (err: unknown) => err instanceof EmbedTokenError && err.status === 401 && !err.retryable && err.attempts === 1);
    assert.equal(calls.length, 1);
    assert.equal(errors.length, 1);
    assert.equal(seen.error.length, 1);
    assert.equal(await source.getToken(), 'token-1');
    assert.equal(calls.length, 2);
  });

  it('embed package: after maxAttempts failures getToken rejects with the last status; the next call starts afresh', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock, [503, 503, 503, 'token']);
    const source = sourceOn(clock, backend, { autoRenew: false, maxAttempts: 3, baseDelayMs: 100 });
    const seen = events(source);
    const pending = source.getToken();
    const outcome = pending.then(
      () => 'resolved',
      (err: EmbedTokenError) => `${err.status} after ${err.attempts}`,
    );
    await clock.advance(5_000);
    assert.equal(await outcome, '503 after 3');
    assert.equal(seen.error.length, 1);
    assert.equal(source.stats.failedRenewals, 1);
    assert.equal(await source.getToken(), 'token-1');
    assert.equal(calls.length, 4);
  });

  it('embed package: a Retry-After longer than maxDelayMs ends the renewal at once, with the wait in the error', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock, [{ status: 503, retryAfter: '120' }]);
    const source = sourceOn(clock, backend, { autoRenew: false });
    await assert.rejects(source.getToken(), (err: unknown) => err instanceof EmbedTokenError && err.retryAfterMs === 120_000);
    assert.equal(calls.length, 1);
  });

  it('embed package: a backend that does not answer is abandoned after attemptTimeoutMs and asked again', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock, ['hang', 'token']);
    const source = sourceOn(clock, backend, { autoRenew: false, attemptTimeoutMs: 2_000, baseDelayMs: 100 });
    const seen = events(source);
    const pending = source.getToken();
    await clock.advance(3_000);
    assert.equal(await pending, 'token-1');
    assert.equal(calls.length, 2);
    assert.match(String(seen.retry[0]?.error.message), /did not answer within 2000 ms/);
  });

  it('embed package: while renewals fail, the held token is answered until its last 5 s; then getToken rejects', async () => {
    const clock = new FakeClock();
    const { backend } = scriptedBackend(clock, ['token', 401, 401, 401, 401]);
    const source = sourceOn(clock, backend);
    const seen = events(source);
    await source.getToken();
    await clock.advance(46_000); // the timer's renewal has failed
    assert.equal(seen.error.length, 1);
    assert.equal(await source.getToken(), 'token-1', '13 s left: still usable');
    await clock.advance(9_000);
    await assert.rejects(source.getToken(), EmbedTokenError);
  });

  it('embed package: after a renewal behind a valid token gave up, callers do not start one each: the next waits a backoff; one without a usable token asks at once', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock, ['token', 401, 401, 401, 'token']);
    const source = sourceOn(clock, backend, { autoRenew: false, baseDelayMs: 1_000 });
    await source.getToken();
    await clock.advance(46_000); // in the renewal window: the first call renews behind the token, and fails
    await source.getToken();
    await settle();
    assert.equal(calls.length, 2);
    for (let i = 0; i < 50; i++) assert.equal(await source.getToken(), 'token-1');
    await settle();
    assert.equal(calls.length, 2, 'fifty calls within the backoff: no request');
    await clock.advance(2_000); // the backoff after one failure in a row: 2 s
    await source.getToken();
    await settle();
    assert.equal(calls.length, 3);
    await clock.advance(8_000); // 4 s left: no usable token, so the caller asks at once, backoff or not
    await assert.rejects(source.getToken(), (err: unknown) => err instanceof EmbedTokenError && err.status === 401);
    assert.equal(calls.length, 4);
    assert.equal(await source.getToken(), 'token-2', 'the failures were not kept');
  });

  it("embed package: without a readable Date header the lifetime is measured from the token's iat", async () => {
    const clock = new FakeClock();
    const iat = Math.floor(clock.time / 1000);
    const claims = Buffer.from(JSON.stringify({ iat, exp: iat + 90 })).toString('base64url');
    const token = `eyJhbGciOiJFUzI1NiJ9.${claims}.c2ln`;
    const source = sourceOn(clock, async () => ({ embed_token: token, expires_at: iat + 90 }), { autoRenew: false, skewMs: 10 * MINUTE });
    const session = await source.getSession();
    assert.equal(session.clock, 'iat');
    assert.equal(session.lifetimeMs, 90_000);
    assert.equal(source.remainingMs(), 89_000);
  });

  it('embed package: an answer without embed_token, or with a token already nearly spent, is refused and not renewed in a loop', async () => {
    const clock = new FakeClock();
    let asked = 0;
    const broken = sourceOn(
      clock,
      async () => {
        asked++;
        return Response.json({ token: 'x' }, { headers: { date: new Date(clock.time).toUTCString() } });
      },
      { autoRenew: false },
    );
    await assert.rejects(broken.getToken(), /no embed_token/);
    assert.equal(asked, 1);
    const spent = sourceOn(
      clock,
      async () =>
        Response.json(
          { embed_token: 'old', expires_at: new Date(clock.time + 8_000).toISOString() },
          { headers: { date: new Date(clock.time).toUTCString() } },
        ),
      { autoRenew: false },
    );
    await assert.rejects(spent.getToken(), /too little to use/);
  });

  it('embed package: a URL backend is fetched with requestInit; a token from sessionStorage (initial) is used without asking', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock);
    const seen: Array<{ url: string; credentials?: string }> = [];
    const options = {
      backend: 'https://app.example/embed-session',
      requestInit: { credentials: 'include' as const },
      fetch: (async (url: string | URL | Request, init?: RequestInit) => {
        seen.push({ url: String(url), credentials: init?.credentials });
        return backend({ signal: init!.signal! });
      }) as typeof fetch,
      autoRenew: false,
    };
    const first = sourceOn(clock, options.backend, options);
    const session = await first.getSession();
    assert.deepEqual(seen, [{ url: 'https://app.example/embed-session', credentials: 'include' }]);
    const restored = sourceOn(clock, options.backend, { ...options, initial: JSON.parse(JSON.stringify(session)) });
    assert.equal(await restored.getToken(), 'token-1');
    assert.equal(calls.length, 1);
  });

  it('embed package: fetch sends the token; a 401 for an expiring token renews once and sends again; for a fresh one it is answered as it is', async () => {
    const clock = new FakeClock();
    const { backend, calls } = scriptedBackend(clock);
    const source = sourceOn(clock, backend, { autoRenew: false });
    const sent: string[] = [];
    // A verifier whose clock runs 10 s ahead of the backend's: it refuses tokens 10 s early.
    const verifier = (async (request: Request) => {
      const token = request.headers.get('authorization') ?? '';
      sent.push(token);
      const expired = token === `Bearer ${source.current?.token}` && source.remainingMs() < 10_000;
      return new Response(expired || token === 'Bearer token-revoked' ? 'expired' : 'rows', {
        status: expired ? 401 : token === 'Bearer token-revoked' ? 403 : 200,
      });
    }) as typeof fetch;
    const query = embedFetch(source, { fetch: verifier });
    assert.equal(await (await query('https://cube.example/load', { method: 'POST', body: '{"q":1}' })).text(), 'rows');
    await clock.advance(52_000); // 7 s left: handed out while the renewal runs, and expired for the verifier
    const response = await query('https://cube.example/load', { method: 'POST', body: '{"q":1}' });
    assert.equal(response.status, 200);
    assert.deepEqual(sent, ['Bearer token-1', 'Bearer token-1', 'Bearer token-2']);
    assert.equal(calls.length, 2);

    // A fresh token refused (here 403) is the answer: no renewal, unless asked for 'always'.
    const fresh = new EmbedTokenSource({
      backend: async () => ({ embed_token: 'token-revoked', expires_at: new Date(clock.time + MINUTE).toISOString() }),
      now: () => clock.time,
      autoRenew: false,
    });
    assert.equal((await embedFetch(fresh, { fetch: verifier })('https://cube.example/load')).status, 403);
    assert.equal(fresh.stats.renewals, 1);
    const always = await embedFetch(fresh, { fetch: verifier, renewAfterRefusal: 'always' })('https://cube.example/load');
    assert.equal(always.status, 403, 'the renewed token is refused too: answered, not retried again');
    assert.equal(fresh.stats.renewals, 2);
  });
});

describe('@ugs/embed against a real service, through examples/embed-demo/backend.mjs', () => {
  const served = useServerProcesses('sqlite', { count: 1 });
  let backend: ExampleProcess;

  before(async () => {
    backend = await startExample(path.join(ROOT, 'examples', 'embed-demo', 'backend.mjs'), {
      UGS_URL: served.on(0),
      UGS_API_TOKEN: served.token,
      EMBED_TOKEN_SECONDS: '60',
      PORT: '0',
    });
  });
  after(() => stopExample(backend));

  it("embed package: a real 60 s embed token, measured on the backend's Date with a browser clock 10 minutes ahead, reads the context through fetch", async () => {
    const source = new EmbedTokenSource({ backend: `${backend.url}/embed-session`, now: () => Date.now() + 10 * MINUTE, autoRenew: false });
    const session = await source.getSession();
    assert.equal(session.clock, 'date');
    assert.ok(session.lifetimeMs > 55_000 && session.lifetimeMs <= 61_000, `lifetime ${session.lifetimeMs} ms`);
    assert.ok(source.remainingMs() > 50_000, `${source.remainingMs()} ms left, by the server's clock`);
    const context = await source.fetch(`${session.answer.context_url}?embed_id=sales-overview`, FROM_PAGE);
    assert.equal(context.status, 200);
    assert.equal((await context.json()).user_group.name, 'ACME Corporation');
    const renewed = await source.renew();
    assert.notEqual(renewed.token, session.token);
    assert.equal(source.stats.renewals, 2);
  });

  it("embed package: after the group's token is rotated, fetch answers the 401 of a fresh token; with renewAfterRefusal 'always' it renews and reads again", async () => {
    const source = new EmbedTokenSource({ backend: `${backend.url}/embed-session`, autoRenew: false });
    const session = await source.getSession();
    const contextUrl = `${session.answer.context_url}?embed_id=sales-overview`;
    assert.equal((await source.fetch(contextUrl, FROM_PAGE)).status, 200);
    const current = await httpRequest(served.on(0), 'GET', '/api/user?user_group_id=acme-corp', { token: served.token });
    const rotated = await httpRequest(served.on(0), 'POST', '/api/user', { token: served.token, body: { current_token: current.body.user_group.token } });
    assert.equal(rotated.status, 200);
    const refused = await source.fetch(contextUrl, FROM_PAGE);
    assert.equal(refused.status, 401, 'a token with most of its life left was revoked, not expired: the page decides');
    assert.equal(source.stats.renewals, 1);
    const again = await source.fetch(contextUrl, FROM_PAGE, { renewAfterRefusal: 'always' });
    assert.equal(again.status, 200);
    assert.equal(source.stats.renewals, 2);
  });

  it('embed package: npm pack ships its build alone, with no dependency; it compiles in a strict NodeNext project and gets a token', async () => {
    const exec = promisify(execFile);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-embed-consumer-'));
    try {
      await exec('npm', ['run', 'build', '-w', '@ugs/embed'], { cwd: ROOT });
      const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'packages/embed/package.json'), 'utf8'));
      assert.equal(manifest.dependencies, undefined, 'no runtime dependency');
      const { stdout: packed } = await exec('npm', ['pack', '-w', '@ugs/embed', '--json', '--pack-destination', dir], { cwd: ROOT });
      const [{ filename, files }] = JSON.parse(packed) as [{ filename: string; files: { path: string }[] }];
      const shipped = files.map((f) => f.path);
      assert.ok(shipped.includes('dist/index.js') && shipped.includes('dist/index.d.ts') && shipped.includes('LICENSE'), shipped.join(', '));
      assert.ok(
        shipped.every((file) => ['package.json', 'README.md', 'LICENSE'].includes(file) || file.startsWith('dist/')),
        shipped.join(', '),
      );
      for (const file of shipped.filter((f) => f.endsWith('.js'))) {
        const text = fs.readFileSync(path.join(ROOT, 'packages/embed', file), 'utf8');
        for (const [, imported] of text.matchAll(/from '([^']+)'/g)) assert.match(imported, /^\.\/[\w-]+\.js$/, `${file} imports only its own modules`);
      }
      const project = path.join(dir, 'consumer');
      fs.mkdirSync(project);
      fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
      await exec('npm', ['install', '--no-audit', '--no-fund', '--offline', path.join(dir, filename)], { cwd: project });
      fs.writeFileSync(
        path.join(project, 'main.ts'),
        `import { EmbedTokenSource, EmbedTokenError, type EmbedSession } from '@ugs/embed';
declare const process: { env: Record<string, string | undefined> };
const source = new EmbedTokenSource({ backend: process.env.BACKEND ?? '', autoRenew: false });
const session: EmbedSession = await source.getSession();
const failing = new EmbedTokenSource({ backend: (process.env.BACKEND ?? '') + '?customer=nobody', autoRenew: false });
const refused = await failing.getToken().catch((err: unknown) => (err instanceof EmbedTokenError ? err.status : 'other'));
console.log(JSON.stringify({ clock: session.clock, about60: Math.abs(session.lifetimeMs - 60_000) <= 2_000, jws: session.token.split('.').length, refused }));
`,
      );
      fs.writeFileSync(
        path.join(project, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            target: 'ES2022',
            lib: ['ES2022', 'DOM'],
            outDir: 'dist',
            types: [],
          },
        }),
      );
      const compiled = await runNode([path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', project]);
      assert.equal(compiled.code, 0, `tsc in the consumer:\n${compiled.stdout}${compiled.stderr}`);
      const ran = await runNode([path.join(project, 'dist/main.js')], { BACKEND: `${backend.url}/embed-session` });
      assert.equal(ran.code, 0, ran.stderr);
      assert.deepEqual(JSON.parse(ran.stdout), { clock: 'date', about60: true, jws: 3, refused: 404 });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
