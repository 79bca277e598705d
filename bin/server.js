// `npm start`: the server, compiled by `npm install` (npm run build) into dist/. With several
// workers (UGS_WORKERS), each worker runs this file again, and it loads the same dist/server.js.
import { runCompiled } from './compiled.js';

await runCompiled('../dist/server.js', 'npm start');
