#!/usr/bin/env node
// The command-line tool, compiled by `npm install` (npm run build) into dist/.
import { runCompiled } from './compiled.js';

await runCompiled('../dist/cli/ugs.js', 'ugs');
