// A bounded load of page views and creates against instances of the service, every answer
// recorded, for what a failover does to callers: the failover tests (test/ha-failover.test.ts)
// assert on the record, the failover benchmark (bench/failover.ts) measures it.
//
// A page view is what an embedded dashboard's backend and page call for one view, on an
// existing group: get-or-create, a lookup, an embed token, the embed context (with the group's
// token), the JWKS. A create is POST /api/user of a new id, followed at once by a lookup of it
// through another instance (read-your-writes across instances).
import http from 'node:http';

export type AnswerKind = 'get-or-create' | 'lookup' | 'embed-token' | 'embed-context' | 'jwks' | 'create' | 'lookup-after-create';

export const PAGE_VIEW_KINDS: readonly AnswerKind[] = ['get-or-create', 'lookup', 'embed-token', 'embed-context', 'jwks'];

export interface Answer {
  kind: AnswerKind;
  /** Which instance answered (its index in the load's `instances`). */
  instance: number;
  /** The HTTP status; 0 when no answer came (the connection failed, or no answer in time). */
  status: number;
  /** error.code of an error envelope, or the transport's error. */
  code?: string;
  retryAfter?: string;
  /** Milliseconds since the epoch: when the request was sent and when its answer ended. */
  start: number;
  end: number;
  /** create and lookup-after-create: the group's id, and its team_id once known. */
  id?: string;
  teamId?: number;
}

export interface ExistingGroup {
  id: string;
  /** Its user group token, for the embed context. */
  token: string;
}

export interface LoadPlan {
  /** The base URLs of the instances. */
  instances: string[];
  /** An API token with read and write. */
  apiToken: string;
  existing: ExistingGroup[];
  /** Makes the created ids this load's own. */
  run: string;
  /** Page views a second, over every worker (0: as fast as they go). */
  pageViewsPerSecond: number;
  /** Creates a second (0: none). */
  createsPerSecond: number;
  /** Concurrent page-view callers (default 8). */
  pageViewWorkers?: number;
  /** Concurrent create callers (default 2). */
  createWorkers?: number;
  /** The load stops by itself after this many answers (a bound, whatever happens). */
  maxAnswers?: number;
  /** How long a request may go unanswered before it counts as failed (default 30 s). */
  requestTimeoutMs?: number;
}

export interface RunningLoad {
  answers: Answer[];
  /** Stops sending, and resolves once every request sent has its answer. */
  stop(): Promise<Answer[]>;
}

const agents = new Map<string, http.Agent>();

function agentFor(baseUrl: string): http.Agent {
  let agent = agents.get(baseUrl);
  if (!agent) {
    agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
    agents.set(baseUrl, agent);
  }
  return agent;
}

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: { success?: number; error?: { code?: string }; user_group?: { team_id?: number; token?: string }; [key: string]: unknown };
  /** The body as it came. */
  text: string;
  transportError?: string;
}

/** One request; never rejects: a failed connection or no answer in `timeoutMs` is status 0. */
export function request(
  baseUrl: string,
  method: string,
  pathAndQuery: string,
  { headers = {}, body, timeoutMs = 30_000 }: { headers?: Record<string, string>; body?: unknown; timeoutMs?: number } = {},
): Promise<Reply> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const sent: Record<string, string> = { ...headers };
  if (payload !== undefined) {
    sent['content-type'] = 'application/json';
    sent['content-length'] = String(Buffer.byteLength(payload));
  }
  return new Promise((resolve) => {
    let settled = false;
    const done = (reply: Reply) => {
      if (settled) return;
      settled = true;
      resolve(reply);
    };
    const req = http.request(new URL(pathAndQuery, baseUrl), { method, headers: sent, agent: agentFor(baseUrl) }, (res) => {
      let text = '';
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => {
        let parsed: Reply['body'] = {};
        try {
          parsed = JSON.parse(text);
        } catch {
          // not JSON: kept as an empty body
        }
        done({ status: res.statusCode ?? 0, headers: res.headers, body: parsed, text });
      });
      res.on('error', (err) => done({ status: 0, headers: {}, body: {}, text: '', transportError: err.message }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => done({ status: 0, headers: {}, body: {}, text: '', transportError: err.code ?? err.message }));
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts the load; it runs until stop() (or maxAnswers). */
export function startLoad(plan: LoadPlan): RunningLoad {
  const answers: Answer[] = [];
  const maxAnswers = plan.maxAnswers ?? 200_000;
  const timeoutMs = plan.requestTimeoutMs ?? 30_000;
  const auth = { authorization: `Token ${plan.apiToken}` };
  let running = true;
  let created = 0;
  // Page views and creates each go round the instances, apart: a shared turn could send every
  // create to one instance.
  let viewTurn = 0;

  const record = (kind: AnswerKind, instance: number, start: number, reply: Reply, extra: Partial<Answer> = {}): Answer => {
    const answer: Answer = {
      kind,
      instance,
      status: reply.status,
      start,
      end: Date.now(),
      ...extra,
    };
    const code = reply.body?.error?.code ?? reply.transportError;
    if (code) answer.code = code;
    const retryAfter = reply.headers['retry-after'];
    if (typeof retryAfter === 'string') answer.retryAfter = retryAfter;
    answers.push(answer);
    if (answers.length >= maxAnswers) running = false;
    return answer;
  };

  const pageView = async (kind: AnswerKind) => {
    const instance = viewTurn++ % plan.instances.length;
    const base = plan.instances[instance];
    const group = plan.existing[Math.floor(Math.random() * plan.existing.length)];
    const start = Date.now();
    const query = `user_group_id=${encodeURIComponent(group.id)}`;
    const reply =
      kind === 'get-or-create'
        ? await request(base, 'GET', `/api/user?${query}`, { headers: auth, timeoutMs })
        : kind === 'lookup'
          ? await request(base, 'GET', `/api/user/lookup?${query}`, { headers: auth, timeoutMs })
          : kind === 'embed-token'
            ? await request(base, 'POST', '/api/embed_token', { headers: auth, body: { user_group_id: group.id, expires_in_seconds: 600 }, timeoutMs })
            : kind === 'embed-context'
              ? await request(base, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${group.token}` }, timeoutMs })
              : await request(base, 'GET', '/.well-known/jwks.json', { timeoutMs });
    record(kind, instance, start, reply);
  };

  const create = async () => {
    const n = ++created;
    const instance = n % plan.instances.length;
    const id = `${plan.run}-c${n}`;
    const start = Date.now();
    const reply = await request(plan.instances[instance], 'POST', '/api/user', { headers: auth, body: { user_group_id: id }, timeoutMs });
    const teamId = reply.status === 201 ? reply.body.user_group?.team_id : undefined;
    record('create', instance, start, reply, { id, teamId });
    if (reply.status !== 201) return;
    // Acknowledged: another instance must find it now.
    const other = (instance + 1) % plan.instances.length;
    const lookupStart = Date.now();
    const lookup = await request(plan.instances[other], 'GET', `/api/user/lookup?user_group_id=${encodeURIComponent(id)}`, {
      headers: auth,
      timeoutMs,
    });
    record('lookup-after-create', other, lookupStart, lookup, { id, teamId });
  };

  /** Runs `step` at `perSecond` (spread over `workers`), or back to back when perSecond is 0. */
  const paced = (workers: number, perSecond: number, step: (n: number) => Promise<void>) =>
    Array.from({ length: workers }, async (_, worker) => {
      const interval = perSecond > 0 ? (1000 * workers) / perSecond : 0;
      // Spread the workers' first requests over one interval.
      let next = Date.now() + (interval * worker) / workers;
      let n = worker;
      while (running) {
        const wait = next - Date.now();
        if (wait > 0) await sleep(wait);
        if (!running) break;
        await step(n);
        n += workers;
        // A worker that fell behind (a slow answer) does not burst to catch up.
        next = Math.max(next + interval, Date.now());
      }
    });

  const pageViewWorkers = plan.pageViewsPerSecond === 0 && plan.createsPerSecond > 0 ? 0 : (plan.pageViewWorkers ?? 8);
  const workers = [
    ...paced(pageViewWorkers, plan.pageViewsPerSecond, (n) => pageView(PAGE_VIEW_KINDS[n % PAGE_VIEW_KINDS.length])),
    ...(plan.createsPerSecond > 0 ? paced(plan.createWorkers ?? 2, plan.createsPerSecond, () => create()) : []),
  ];
  const finished = Promise.all(workers);
  return {
    answers,
    async stop() {
      running = false;
      await finished;
      return answers;
    },
  };
}

export function isPageView(answer: Answer): boolean {
  return PAGE_VIEW_KINDS.includes(answer.kind);
}

/** The answers sent from `from` to `to` (ms since the epoch). */
export function sentBetween(answers: readonly Answer[], from: number, to: number): Answer[] {
  return answers.filter((a) => a.start >= from && a.start <= to);
}

export interface PageViewCount {
  total: number;
  answered2xx: number;
  /** The share answered 2xx, out of 100 (100 when there were none). */
  percent: number;
  /** The failures by status and code (`503 unavailable`, `0 ECONNRESET`). */
  failures: Record<string, number>;
}

export function countPageViews(answers: readonly Answer[]): PageViewCount {
  const views = answers.filter(isPageView);
  const ok = views.filter((a) => a.status >= 200 && a.status < 300);
  const failures: Record<string, number> = {};
  for (const a of views) {
    if (a.status >= 200 && a.status < 300) continue;
    const key = `${a.status} ${a.code ?? ''}`.trim();
    failures[key] = (failures[key] ?? 0) + 1;
  }
  return { total: views.length, answered2xx: ok.length, percent: views.length === 0 ? 100 : (100 * ok.length) / views.length, failures };
}

export interface WriteErrors {
  creates: number;
  acknowledged: number;
  failed: number;
  /** From the first failed create's start to the last one's end, in seconds (0 when none failed). */
  spanSeconds: number;
  /** How long each 503 took to come, in ms: its median, 90th and 99th percentile and maximum. */
  timeTo503Ms: { count: number; p50: number; p90: number; p99: number; max: number } | null;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export function countWriteErrors(answers: readonly Answer[]): WriteErrors {
  const creates = answers.filter((a) => a.kind === 'create');
  const failed = creates.filter((a) => a.status !== 201);
  const spanSeconds = failed.length === 0 ? 0 : (Math.max(...failed.map((a) => a.end)) - Math.min(...failed.map((a) => a.start))) / 1000;
  const waits = creates
    .filter((a) => a.status === 503)
    .map((a) => a.end - a.start)
    .sort((x, y) => x - y);
  return {
    creates: creates.length,
    acknowledged: creates.length - failed.length,
    failed: failed.length,
    spanSeconds,
    timeTo503Ms:
      waits.length === 0
        ? null
        : { count: waits.length, p50: percentile(waits, 50), p90: percentile(waits, 90), p99: percentile(waits, 99), max: waits[waits.length - 1] },
  };
}
