// Preloaded into a server started with UGS_WORKERS by test/workers.test.ts (node --import; the
// workers inherit it): the worker whose cluster id is HOLD_WORKER (1, 2, … in the order the
// primary forks them, a replacement taking the next) waits before its server starts until the
// file HOLD_UNTIL exists, as a worker slow to start on a loaded machine would.
import cluster from 'node:cluster';
import fs from 'node:fs';

if (cluster.isWorker && String(cluster.worker?.id) === process.env.HOLD_WORKER) {
  while (!fs.existsSync(String(process.env.HOLD_UNTIL))) await new Promise((resolve) => setTimeout(resolve, 20));
}
