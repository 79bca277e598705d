// A process that logs a burst through the server's log stream, then one last line, then
// finishes the stream and exits: what server.ts does at SIGTERM, without the server around it.
import { pino } from 'pino';
import { createLogStream } from '../../src/process/log-stream.ts';

const lines = Number(process.argv[2]);
const logs = createLogStream();
const log = pino({}, logs.stream);
for (let i = 0; i < lines; i++) log.info({ i, pad: 'x'.repeat(100) }, 'burst');
log.info('stopped');
await logs.finish(2000);
process.exit(0);
