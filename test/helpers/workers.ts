// Seeing the workers of a server started with UGS_WORKERS (src/process/cluster/) from outside, as an
// operator would: their processes (the primary's children) and, from the log, which process
// answered which request (each log line carries its process's pid).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import type { ServerProcess } from './processes.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The pids of a process's children (Linux: /proc/<pid>/task/<tid>/children). */
export function childPids(pid: number): number[] {
  try {
    return fs
      .readdirSync(`/proc/${pid}/task`)
      .flatMap((task) => fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/))
      .filter(Boolean)
      .map(Number);
  } catch {
    return []; // the process is gone
  }
}

export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits (up to `timeoutMs`) until `ready` holds; fails with `what` otherwise. */
export async function waitUntil(ready: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (Date.now() > deadline) assert.fail(`waited ${timeoutMs} ms for ${what}`);
    await sleep(50);
  }
}

/** The server's worker pids once `count` of them run and listen (each logged "worker listening at"). */
export async function workerPids(server: ServerProcess, count: number): Promise<number[]> {
  let pids: number[] = [];
  await waitUntil(() => {
    pids = childPids(server.child.pid!);
    const listening = new Set(
      logLines(server)
        .filter((line) => String(line.msg).startsWith('worker listening at'))
        .map((line) => Number(line.pid)),
    );
    return pids.length === count && pids.every((pid) => listening.has(pid));
  }, `${count} workers listening\n${server.output()}`);
  return pids;
}

/** Which process answered each request (X-Request-Id → pid) whose log line is there now. */
export function answeredSoFar(server: ServerProcess): Map<string, number> {
  const answered = new Map<string, number>();
  for (const line of logLines(server)) if (typeof line.request_id === 'string') answered.set(line.request_id, Number(line.pid));
  return answered;
}

/** The log lines the server printed so far, parsed (lines that are not JSON are skipped). */
export function logLines(server: ServerProcess): Record<string, unknown>[] {
  return server
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));
}

/** Which process answered each request (by its X-Request-Id), from the request log lines: waits for them (they are written in batches). */
export async function answeredBy(server: ServerProcess, requestIds: string[]): Promise<Map<string, number>> {
  let answered = new Map<string, number>();
  await waitUntil(
    () => {
      answered = answeredSoFar(server);
      return requestIds.every((id) => answered.has(id));
    },
    'the request log lines',
    10_000,
  );
  return new Map(requestIds.map((id) => [id, answered.get(id)!]));
}
