// The app's route table, read from the router itself (printRoutes), so that a suite built on
// it notices a route nobody told it about.
import type { FastifyInstance } from 'fastify';

export interface RouteEntry {
  method: string;
  url: string;
  /** Router constraints, e.g. {"methodOverride":"GET"}; empty for none. */
  constraints: string;
  /** `METHOD url`, plus ` <constraints>` for a constrained variant. */
  key: string;
}

// Public routes without credentials (the JWKS is public keys, the discovery document says where they are: test/embed-jws.test.ts).
const OPERATIONAL = [
  /^\/$/, // the front page: two links, nothing else (test/front-page.browser.test.ts)
  /^\/console/,
  /^\/healthz$/,
  /^\/readyz$/,
  /^\/metrics$/,
  /^\/openapi\.json$/,
  /^\/docs/,
  /^\/\.well-known\/jwks\.json$/,
  /^\/\.well-known\/openid-configuration$/,
];

export function isOperational(url: string): boolean {
  return OPERATIONAL.some((pattern) => pattern.test(url));
}

/** Every (method, url, constraints) the router knows; HEAD and OPTIONS (CORS preflights) left out. */
export function routeTable(app: FastifyInstance): RouteEntry[] {
  const text = app.printRoutes({ commonPrefix: false });
  const stack: string[] = [''];
  const routes: RouteEntry[] = [];
  for (const line of text.split('\n')) {
    const match = /^([│├└─\s]*)(\S.*?) \(([A-Z, ]+)\)(?: (\{.*\}))?$/.exec(line);
    if (!match) continue;
    const depth = Math.round(match[1].length / 4);
    const url = (stack[depth - 1] ?? '') + match[2];
    stack[depth] = url;
    stack.length = depth + 1;
    for (const method of match[3].split(',').map((m) => m.trim())) {
      if (method === 'HEAD' || method === 'OPTIONS') continue;
      const constraints = match[4] ?? '';
      routes.push({ method, url, constraints, key: `${method} ${url}${constraints ? ` ${constraints}` : ''}` });
    }
  }
  return routes;
}
