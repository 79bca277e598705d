// Work that waits for the end of the event loop's current turn (its I/O callbacks done), run
// in one setImmediate pass. Work added during that pass runs in the same pass, not a turn
// later: a GET body read at the end of the turn leads to a lookup that is batched at the end
// of the turn (hot-reads.ts), and with two separate setImmediate calls that lookup would
// miss its batch and wait a whole turn (get-or-create with a JSON body then batched far fewer
// reads together: docs/performance.md, "What was optimized").

const queue: (() => void)[] = [];
let scheduled = false;

function drain(): void {
  for (let i = 0; i < queue.length; i++) {
    try {
      queue[i]();
    } catch (err) {
      // Each piece of work handles its own errors; one that does not must not stop the rest.
      process.nextTick(() => {
        throw err;
      });
    }
  }
  queue.length = 0;
  scheduled = false;
}

export function atEndOfTurn(work: () => void): void {
  queue.push(work);
  if (!scheduled) {
    scheduled = true;
    setImmediate(drain);
  }
}
