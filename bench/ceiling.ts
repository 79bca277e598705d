// The ceiling: a bare Fastify process on the same machine, with a route for every method and
// path the scenarios use. It accepts the same requests the real server gets (JSON bodies are
// read and parsed, GET bodies included, as the service does) and answers, for the scenario
// being measured, a constant copy of a real response of the service: same status, same
// headers, same body bytes. No authentication, no database, no validation, no logging: what
// is left is the cost of Node, HTTP and Fastify, i.e. the most any service on them could do.
//
//   node --import tsx bench/ceiling.ts      (PORT, default 0; prints "ceiling listening at <url>")
// Control (called by bench/run.ts between scenarios, never while measuring):
//   PUT /__ceiling/responses  {"<scenario>": {"status": 200, "headers": {...}, "body": "..."}, ...}
//   PUT /__ceiling/active     {"scenario": "<scenario>"}
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { SCENARIOS } from './scenarios.ts';

interface CannedResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const responses = new Map<string, CannedResponse>();
let active: CannedResponse | undefined;

const app = Fastify({ logger: false, exposeHeadRoutes: false, bodyLimit: 16 * 1024 * 1024 });

async function readJsonBody(request: FastifyRequest): Promise<unknown> {
  const length = Number(request.headers['content-length'] ?? 0);
  if (!(length > 0)) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of request.raw) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

async function answer(request: FastifyRequest, reply: FastifyReply) {
  // Fastify never reads a GET body; the service does (its get-or-create carries one).
  if (request.method === 'GET' && request.body === undefined) request.body = await readJsonBody(request);
  if (!active) return reply.code(503).send({ error: 'no active scenario' });
  return reply.code(active.status).headers(active.headers).send(active.body);
}

const routes = new Set<string>();
for (const scenario of SCENARIOS) {
  const key = `${scenario.method} ${scenario.path}`;
  if (routes.has(key)) continue;
  routes.add(key);
  app.route({ method: scenario.method, url: scenario.path, handler: answer });
}

app.put('/__ceiling/responses', async (request) => {
  for (const [name, response] of Object.entries(request.body as Record<string, CannedResponse>)) responses.set(name, response);
  return { ok: true, scenarios: [...responses.keys()] };
});
app.put('/__ceiling/active', async (request, reply) => {
  const name = (request.body as { scenario: string }).scenario;
  active = responses.get(name);
  if (!active) return reply.code(404).send({ error: `no response for scenario ${name}` });
  return { ok: true };
});

const address = await app.listen({ host: process.env.HOST || '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.stdout.write(`ceiling listening at ${address}\n`);
const stop = () => void app.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
