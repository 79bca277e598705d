#!/usr/bin/env node
// The command-line tool, compiled by `npm install` (npm run build) into dist/.
try {
  await import('../dist/cli/ugs.js');
} catch (err) {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('dist/cli/ugs.js')) throw err;
  console.error('ugs: dist/ is missing: run npm install (or npm run build) first');
  process.exitCode = 1;
}
