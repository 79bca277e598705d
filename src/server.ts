// The process `npm start` runs. With UGS_WORKERS=1 (the default) it is the server itself
// (server-process.ts); above 1 it is the primary that starts that many workers sharing the port
// (process/cluster/primary.ts), and each worker runs this same file. Each path loads only its own
// modules: the primary serves no request and needs neither Fastify nor the app.
// First, before any other module is evaluated: on an unsupported Node.js, say so and stop.
import './process/node-version.ts';
import cluster from 'node:cluster';
import { loadConfig } from './config.ts';
import { exitOnStartFailure } from './process/startup.ts';

async function main(): Promise<void> {
  const config = loadConfig();
  if (config.workers > 1 && cluster.isPrimary) {
    const { runPrimary } = await import('./process/cluster/primary.ts');
    return runPrimary(config);
  }
  const { serve } = await import('./server-process.ts');
  if (config.workers === 1) return serve(config);
  const { linkToPrimary } = await import('./process/cluster/worker-link.ts');
  return serve(config, linkToPrimary());
}

main().catch(exitOnStartFailure);
