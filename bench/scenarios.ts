import type { EmbedSigningAlgorithm } from '../src/config.ts';

// What each benchmark scenario sends. One definition serves three users: the load process
// (autocannon's setupRequest/onResponse), the probe that measures a real response before the
// ceiling is built, and the documentation (docs/performance.md). The ceiling and the real
// server receive byte-for-byte the same kind of requests from the same code.

/**
 * The seeded groups: `bench-0` … `bench-<n-1>`, named `Group <i>`, all in Customer. The first
 * nine tenths are flat (every tenth of them tagged `tenth`); the last tenth (when there are at
 * least 1,000) are trees three levels deep: tree node j (i = flat + j) is a root when j % 1000 is
 * 0, a team under that root when j % 100 is 0, and else a user under the team (or the root)
 * j - j % 100. Roots carry the mapping and most properties, teams one more, users their own
 * seat count: a user's computed properties merge three levels. A team has 99 users.
 */
export function benchLayout(groups: number): { flat: number; tree: number } {
  const tree = groups >= 10_000 ? Math.floor(groups / 10 / 1000) * 1000 : 0;
  return { flat: groups - tree, tree };
}

/** The tree index of node j's parent, or null for a root. */
export function treeParent(j: number): number | null {
  if (j % 1000 === 0) return null;
  if (j % 100 === 0) return j - (j % 1000);
  return j - (j % 100);
}

/** A random tree node at depth 3 (a user under a team). */
export function randomDeepNode(tree: number): number {
  for (;;) {
    const j = randomIndex(tree);
    if (j % 1000 >= 100 && j % 100 !== 0) return j;
  }
}

export interface ScenarioData {
  /** How many flat groups lead the seeded ones (see benchLayout): the flat scenarios pick among them. */
  groups: number;
  /** The trees follow the flat groups: `bench-<groups + j>` for tree node j < treeSize. */
  treeSize: number;
  /** Current tokens of random depth-3 groups, for embed-child. */
  childTokens: string[];
  /** A read,write API token of the benchmark's account. */
  apiToken: string;
  /** Current tokens of random seeded groups, for the embed scenario (never rotated). */
  embedTokens: string[];
  /** Embed tokens of random flat groups, per signing algorithm, minted by the server before the load. */
  jwsTokens: Partial<Record<EmbedSigningAlgorithm, string[]>>;
  /** Current tokens of other seeded groups, one per in-flight rotation (see rotate below). */
  rotateTokens: string[];
  /** A cursor ({"after": team_id}, base64url) pointing 90 % of the way into the listing. */
  deepCursor: string;
  /** Prefix of ids the create scenario invents; unique per run and target, same length for both. */
  createPrefix: string;
}

export interface BenchRequest {
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface ScenarioRunner {
  /** The next request; `context` is autocannon's per-connection context for this request. */
  next(context: Record<string, unknown>): BenchRequest | null;
  /** Every response, with the context its request was built with. */
  onResponse?(status: number, body: string, context: Record<string, unknown>): void;
}

export interface ScenarioDefinition {
  name: string;
  method: BenchRequest['method'];
  path: string;
  /** The status a successful response has. */
  status: number;
  description: string;
  /** The embed tokens it sends: ScenarioData.jwsTokens of this algorithm (minted through the running server). */
  jwsAlgorithm?: EmbedSigningAlgorithm;
  /** The algorithm the server must sign with while it runs (the mint scenarios). */
  signingAlgorithm?: EmbedSigningAlgorithm;
  /** Groups written per request (create: 1; upsert: UPSERT_BATCH), for the groups/s column. */
  groupsPerRequest?: number;
  /**
   * A mixed load: the scenario runs against the server alone, then again while one more client
   * pages through every group with this `limit` (bench/processes.ts, pageThroughEveryGroup);
   * the report gives both p99 latencies and their ratio.
   */
  pagerLimit?: number;
  /**
   * The most connections it is measured with (fewer than --connections): a client that sends
   * requests this large sends them one or two at a time, and more in flight would queue more
   * work than the measurement lasts (the warm-up's queue would be served in the measurement).
   */
  maxConnections?: number;
  make(data: ScenarioData): ScenarioRunner;
}

/** Groups per bulk upsert request: what `ugs import` sends (the most the route takes). */
const UPSERT_BATCH = 1000;
/** Batches in flight at once: `ugs import` sends one at a time; a second keeps the server busy while the client sends the next. */
const UPSERT_CONNECTIONS = 2;
const randomIndex = (n: number) => Math.floor(Math.random() * n);
const json = { 'content-type': 'application/json' };
const auth = (data: ScenarioData) => ({ authorization: `Token ${data.apiToken}` });

/** The hit scenario's requests: a get-or-create of a random existing flat group, identified by a JSON body. */
const hitRequests = (data: ScenarioData): ScenarioRunner => ({
  next: () => {
    const i = randomIndex(data.groups);
    return {
      method: 'GET',
      path: '/api/user',
      headers: { ...auth(data), ...json },
      body: JSON.stringify({ user_group_id: `bench-${i}`, name: `Group ${i}` }),
    };
  },
});

/** The page size of the client that pages through every group in hit-paging: the most a page holds (docs/api.md). */
const PAGER_LIMIT = 500;

export const SCENARIOS: ScenarioDefinition[] = [
  {
    name: 'hit',
    method: 'GET',
    path: '/api/user',
    status: 200,
    description: 'get-or-create of a random existing group, identified by a JSON body: `GET /api/user` `{"user_group_id":"bench-<i>","name":"Group <i>"}`',
    make: hitRequests,
  },
  {
    name: 'hit-paging',
    method: 'GET',
    path: '/api/user',
    status: 200,
    pagerLimit: PAGER_LIMIT,
    description: `the requests of hit, measured twice against the server: alone, then while one more client pages through every group, page after page and pass after pass (\`GET /api/users?limit=${PAGER_LIMIT}\`, following next_cursor): a nightly sync beside the page views. The report gives hit's p99 latency in both and their ratio; the ratio to the ceiling is the second's`,
    make: hitRequests,
  },
  {
    name: 'hit-query',
    method: 'GET',
    path: '/api/user',
    status: 200,
    description: 'the same, identified by the query string: `GET /api/user?user_group_id=bench-<i>&name=Group%20<i>`, no body',
    make: (data) => ({
      next: () => {
        const i = randomIndex(data.groups);
        return { method: 'GET', path: `/api/user?user_group_id=bench-${i}&name=Group%20${i}`, headers: auth(data) };
      },
    }),
  },
  {
    name: 'create',
    method: 'POST',
    path: '/api/user',
    status: 201,
    groupsPerRequest: 1,
    description:
      'create of a new group with a unique id: `POST /api/user` `{"user_group_id":"<run>-<n>","name":"New group <n>","properties":{"region":"emea","plan":"pro"}}`',
    make: (data) => {
      let counter = 0;
      return {
        next: () => {
          const n = counter++;
          const body = { user_group_id: `${data.createPrefix}${n}`, name: `New group ${n}`, properties: { region: 'emea', plan: 'pro' } };
          return { method: 'POST', path: '/api/user', headers: { ...auth(data), ...json }, body: JSON.stringify(body) };
        },
      };
    },
  },
  {
    name: 'upsert',
    method: 'POST',
    path: '/api/users/upsert',
    status: 200,
    groupsPerRequest: UPSERT_BATCH,
    maxConnections: UPSERT_CONNECTIONS,
    description: `bulk create: \`POST /api/users/upsert\` with ${UPSERT_BATCH} new groups, each the body of the create scenario`,
    make: (data) => {
      let counter = 0;
      return {
        next: () => {
          const user_groups = Array.from({ length: UPSERT_BATCH }, () => {
            const n = counter++;
            return { user_group_id: `${data.createPrefix}u${n}`, name: `New group ${n}`, properties: { region: 'emea', plan: 'pro' } };
          });
          return { method: 'POST', path: '/api/users/upsert', headers: { ...auth(data), ...json }, body: JSON.stringify({ user_groups }) };
        },
      };
    },
  },
  {
    name: 'update',
    method: 'PUT',
    path: '/api/user',
    status: 200,
    description:
      'update of a random existing group with a new random name and properties (so every request really writes): `PUT /api/user` `{"user_group_id":"bench-<i>","name":"Group <i> v<r>","properties":{"region":"emea","plan":"pro","seats":<r>}}`',
    make: (data) => ({
      next: () => {
        const i = randomIndex(data.groups);
        const r = 10_000 + randomIndex(90_000);
        const body = { user_group_id: `bench-${i}`, name: `Group ${i} v${r}`, properties: { region: 'emea', plan: 'pro', seats: r } };
        return { method: 'PUT', path: '/api/user', headers: { ...auth(data), ...json }, body: JSON.stringify(body) };
      },
    }),
  },
  {
    name: 'rotate',
    method: 'POST',
    path: '/api/user',
    status: 200,
    description: [
      'token rotation: `POST /api/user` `{"current_token":"<the group\'s latest token>"}`. Each request in flight owns a distinct group',
      '(pipelining is 1, so at most one per connection); the token a response returns is the one the next request for that group sends.',
    ].join(' '),
    make: (data) => {
      // autocannon resets a connection's context after every pass over its request list, so a
      // token cannot stay in the context from one response to the next request. Instead the
      // groups sit in a free list: setupRequest takes one (and notes it in the context),
      // onResponse puts it back with the token the response carries.
      const free = [...data.rotateTokens];
      return {
        next: (context) => {
          const token = free.pop();
          if (token === undefined) return null; // cannot happen with >= connections groups
          context.token = token;
          return { method: 'POST', path: '/api/user', headers: { ...auth(data), ...json }, body: JSON.stringify({ current_token: token }) };
        },
        onResponse: (status, body, context) => {
          const sent = context.token as string | undefined;
          if (sent === undefined) return;
          context.token = undefined;
          let next = sent;
          if (status === 200) {
            try {
              next = (JSON.parse(body) as { user_group: { token: string } }).user_group.token;
            } catch {
              // keep the token that was sent; the error shows up as a failed request
            }
          }
          free.unshift(next);
        },
      };
    },
  },
  {
    name: 'embed',
    method: 'GET',
    path: '/api/embed/context',
    status: 200,
    description: 'embed context of a random group: `GET /api/embed/context` with `Authorization: Bearer <user group token>`',
    make: (data) => ({
      next: () => ({
        method: 'GET',
        path: '/api/embed/context',
        headers: { authorization: `Bearer ${data.embedTokens[randomIndex(data.embedTokens.length)]}` },
      }),
    }),
  },
  ...(['ES256', 'EdDSA', 'RS256'] as const).map(
    (algorithm): ScenarioDefinition => ({
      name: `embed-jws-${algorithm.toLowerCase()}`,
      method: 'GET',
      path: '/api/embed/context',
      status: 200,
      jwsAlgorithm: algorithm,
      description: `embed context with an ${algorithm} embed token of a random group (2,000 tokens, each verified once, then remembered): \`GET /api/embed/context\` with \`Authorization: Bearer <embed token>\``,
      make: (data) => ({
        next: () => {
          const tokens = data.jwsTokens[algorithm]!;
          return { method: 'GET', path: '/api/embed/context', headers: { authorization: `Bearer ${tokens[randomIndex(tokens.length)]}` } };
        },
      }),
    }),
  ),
  ...(['ES256', 'EdDSA', 'RS256'] as const).map(
    (algorithm): ScenarioDefinition => ({
      name: `mint-${algorithm.toLowerCase()}`,
      method: 'POST',
      path: '/api/embed_token',
      status: 200,
      signingAlgorithm: algorithm,
      description: `an embed token for a random flat group, the server signing with ${algorithm}: \`POST /api/embed_token\` \`{"user_group_id":"bench-<i>"}\` with an API token`,
      make: (data) => ({
        next: () => {
          const i = randomIndex(data.groups);
          return { method: 'POST', path: '/api/embed_token', headers: { ...auth(data), ...json }, body: JSON.stringify({ user_group_id: `bench-${i}` }) };
        },
      }),
    }),
  ),
  {
    name: 'introspect',
    method: 'POST',
    path: '/api/embed/introspect',
    status: 200,
    jwsAlgorithm: 'ES256',
    description:
      'introspection of an ES256 embed token of a random group (the same 2,000 tokens as embed-jws-es256): `POST /api/embed/introspect` `{"token":"<embed token>"}` with an API token',
    make: (data) => ({
      next: () => {
        const tokens = data.jwsTokens.ES256!;
        return {
          method: 'POST',
          path: '/api/embed/introspect',
          headers: { ...auth(data), ...json },
          body: JSON.stringify({ token: tokens[randomIndex(tokens.length)] }),
        };
      },
    }),
  },
  {
    name: 'hit-child',
    method: 'GET',
    path: '/api/user',
    status: 200,
    description:
      'get-or-create of a random existing group three levels deep (its computed fields merge three levels): `GET /api/user` `{"user_group_id":"bench-<i>","name":"Group <i>"}`',
    make: (data) => ({
      next: () => {
        const i = data.groups + randomDeepNode(data.treeSize);
        return {
          method: 'GET',
          path: '/api/user',
          headers: { ...auth(data), ...json },
          body: JSON.stringify({ user_group_id: `bench-${i}`, name: `Group ${i}` }),
        };
      },
    }),
  },
  {
    name: 'embed-child',
    method: 'GET',
    path: '/api/embed/context',
    status: 200,
    description: 'embed context of a random group three levels deep (its variables merge three levels): `GET /api/embed/context` with its user group token',
    make: (data) => ({
      next: () => ({
        method: 'GET',
        path: '/api/embed/context',
        headers: { authorization: `Bearer ${data.childTokens[randomIndex(data.childTokens.length)]}` },
      }),
    }),
  },
  {
    name: 'list-tag',
    method: 'GET',
    path: '/api/users',
    status: 200,
    description: 'the first page of the groups with a tag (one flat group in ten has it): `GET /api/users?limit=100&tag=tenth`',
    make: (data) => ({ next: () => ({ method: 'GET', path: '/api/users?limit=100&tag=tenth', headers: auth(data) }) }),
  },
  {
    name: 'list-children',
    method: 'GET',
    path: '/api/users',
    status: 200,
    description:
      'the children of a random team (99 groups, three levels deep, each with its computed fields): `GET /api/users?limit=100&parent_user_group_id=bench-<team>`',
    make: (data) => ({
      next: () => {
        const teams = data.treeSize / 100 - data.treeSize / 1000; // j % 100 === 0 and j % 1000 !== 0
        const k = randomIndex(teams);
        const j = Math.floor(k / 9) * 1000 + ((k % 9) + 1) * 100;
        return { method: 'GET', path: `/api/users?limit=100&parent_user_group_id=bench-${data.groups + j}`, headers: auth(data) };
      },
    }),
  },
  {
    name: 'list-first',
    method: 'GET',
    path: '/api/users',
    status: 200,
    description: 'the first page of the listing: `GET /api/users?limit=100`',
    make: (data) => ({ next: () => ({ method: 'GET', path: '/api/users?limit=100', headers: auth(data) }) }),
  },
  {
    name: 'list-q',
    method: 'GET',
    path: '/api/users',
    status: 200,
    description:
      'a search, as a search box sends it: `GET /api/users?limit=100&q=<prefix>`, the prefix `bench-<i>` (a prefix of the id) or `Group <i>` (of the name) for a random i from the last 99 % of the groups, alternately; it matches 1 to 11 groups',
    make: (data) => {
      let n = 0;
      // Below groups / 100 a prefix matches a hundred groups or more (`bench-5`: 5, 50-59,
      // 500-599, …): a page of 100 among searches of 1 to 11, and, when the ceiling's copy
      // of a response was one of them, a ratio to a ceiling answering a full page.
      const least = Math.floor(data.groups / 100);
      return {
        next: () => {
          const i = least + randomIndex(data.groups - least);
          const q = n++ % 2 === 0 ? `bench-${i}` : `Group ${i}`;
          return { method: 'GET', path: `/api/users?limit=100&q=${encodeURIComponent(q)}`, headers: auth(data) };
        },
      };
    },
  },
  {
    name: 'list-deep',
    method: 'GET',
    path: '/api/users',
    status: 200,
    description: 'a page 90 % deep into the listing: `GET /api/users?limit=100&cursor=<base64url {"after": team_id}>`',
    make: (data) => ({
      next: () => ({ method: 'GET', path: `/api/users?limit=100&cursor=${data.deepCursor}`, headers: auth(data) }),
    }),
  },
];

export const SCENARIO_NAMES = SCENARIOS.map((s) => s.name);

export function scenarioByName(name: string): ScenarioDefinition {
  const scenario = SCENARIOS.find((s) => s.name === name);
  if (!scenario) throw new Error(`unknown scenario "${name}" (known: ${SCENARIO_NAMES.join(', ')})`);
  return scenario;
}
