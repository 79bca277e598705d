// Preloaded into a server process by the soak test (node --expose-gc --import): collects
// garbage every few milliseconds, so that native objects (better-sqlite3's statements) are
// finalized while the server runs and at its exit, where Node 24.19+ aborted better-sqlite3
// 12. Says at exit how many collections it forced, so the test knows they happened.
const INTERVAL_MS = 10;

if (typeof globalThis.gc !== 'function') throw new Error('gc-pressure needs node --expose-gc');
let forced = 0;
setInterval(() => {
  globalThis.gc();
  forced++;
}, INTERVAL_MS).unref();
process.on('exit', () => process.stderr.write(`gc-pressure: ${forced} forced collections\n`));
