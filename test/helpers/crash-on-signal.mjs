// Preloaded into a server process by test/crash.test.ts (node --import): on SIGUSR2 the
// process meets a bug that no handler catches, as a thrown exception (CRASH_AS=exception) or
// a rejected promise nobody awaits (CRASH_AS=rejection), in the same turn as a log line the
// server has just batched.
process.on('SIGUSR2', () => {
  setImmediate(() => {
    if (process.env.CRASH_AS === 'rejection') void Promise.reject(new Error('crash test: a rejection nobody handled'));
    else throw new Error('crash test: an exception nobody caught');
  });
});
