// First, before any other module is evaluated: on an unsupported Node.js, say so and stop.
import '../process/node-version.ts';
import { runCli } from './main.ts';

// A reader that stops early (`ugs export … | head`) closes the pipe: stop there, quietly, with
// the status a command killed by SIGPIPE has (128 + 13), as other Unix tools do. Without this,
// the export ended with "ugs: write EPIPE" and status 1, or with an unhandled 'error' event.
const OUTPUT_CLOSED = 141;
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(OUTPUT_CLOSED);
});

process.exitCode = await runCli(process.argv.slice(2));
