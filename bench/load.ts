// The load generator, run as its own process so that it never shares an event loop with
// what it measures: `node --import tsx bench/load.ts <job.json>`. Warms the target up, then
// measures, with autocannon's programmatic API; prints one JSON line with the result.
import fs from 'node:fs';
import autocannon, { type Request, type Result } from 'autocannon';
import { scenarioByName, type ScenarioData } from './scenarios.ts';

export interface LoadJob {
  url: string;
  scenario: string;
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  data: ScenarioData;
}

export interface LoadResult {
  requestsPerSecond: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  latencyMeanMs: number;
  requests: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodes: Record<string, number>;
  durationSeconds: number;
  /** This load generator's own CPU time per request of the measurement (not its warm-up): the part of the machine it takes. */
  cpuMsPerRequest: number;
}

async function run(job: LoadJob, durationSeconds: number): Promise<Result> {
  // A fresh runner per run: its state (create counter, rotation free list) carries over
  // from the warm-up to the measurement because both take it from the same closure.
  const request: Request = {
    method: scenario.method,
    path: scenario.path,
    setupRequest: (req, context) => {
      const next = runner.next(context);
      if (!next) return null;
      req.method = next.method;
      req.path = next.path;
      req.headers = next.headers;
      req.body = next.body ?? '';
      return req;
    },
  };
  if (runner.onResponse) request.onResponse = (status, body, context) => runner.onResponse!(status, body, context);
  return autocannon({ url: job.url, connections: job.connections, duration: durationSeconds, pipelining: 1, timeout: 10, requests: [request] });
}

const job = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')) as LoadJob;
const scenario = scenarioByName(job.scenario);
const runner = scenario.make(job.data);

if (job.warmupSeconds > 0) await run(job, job.warmupSeconds);
const cpuBefore = process.cpuUsage();
const result = await run(job, job.durationSeconds);
const cpu = process.cpuUsage(cpuBefore);
const statusCodes: Record<string, number> = {};
for (const [code, { count }] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = count;
const out: LoadResult = {
  requestsPerSecond: result.requests.average,
  latencyP50Ms: result.latency.p50,
  latencyP99Ms: result.latency.p99,
  latencyMeanMs: result.latency.mean,
  requests: result.requests.total,
  errors: result.errors,
  timeouts: result.timeouts,
  non2xx: result.non2xx,
  statusCodes,
  durationSeconds: result.duration,
  cpuMsPerRequest: (cpu.user + cpu.system) / 1000 / Math.max(1, result.requests.total),
};
process.stdout.write(JSON.stringify(out) + '\n');
