// The server's log stream (src/process/log-stream.ts) batches lines; at exit it must write all of
// them. The last lines used to be lost when a batch was still being written as the process
// finished the stream, so the "stopped" line was sometimes missing after a SIGTERM.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { runNode } from './helpers/processes.ts';

describe('log stream', () => {
  it('every line logged before the exit is written, the last one included, even right after a burst', async () => {
    // The tail was lost when the burst's last 16 KiB batch held 4 KiB or less. Bursts 9 lines
    // (~1.4 KiB) apart across one batch's worth of lines make sure some of them end that way.
    const bursts = [0, 1, ...Array.from({ length: 13 }, (_, k) => 3000 + 9 * k)];
    for (const lines of bursts) {
      const { code, stdout } = await runNode(['--import', 'tsx', 'test/helpers/log-burst.ts', String(lines)]);
      assert.equal(code, 0);
      const written = stdout
        .trimEnd()
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line));
      assert.equal(written.length, lines + 1, `${lines} burst lines and "stopped"`);
      assert.deepEqual(
        written.slice(0, lines).map((l) => l.i),
        Array.from({ length: lines }, (_, i) => i),
      );
      assert.equal(written.at(-1).msg, 'stopped');
    }
  });
});
