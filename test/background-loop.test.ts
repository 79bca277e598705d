// The background loop (src/foundations/background-loop.ts) that every loop of the service runs
// on: the sequencer, the dispatcher, the sweeper, the leases' renewals, the heartbeat. Its
// promises: one pass at a time, a wake-up during a pass brings another, a failed pass is
// reported and the loop goes on, and stop waits for the pass running and runs no other.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { BackgroundLoop, type BackgroundLoopOptions } from '../src/foundations/background-loop.ts';
import { backgroundWork } from '../src/foundations/background-work.ts';
import { eventually } from './helpers/wait.ts';

/** A pass that waits until the test lets it end. */
function gate() {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

function loopOf(options: Partial<BackgroundLoopOptions> & Pick<BackgroundLoopOptions, 'pass'>) {
  const errors: string[] = [];
  const loop = new BackgroundLoop({
    name: 'test loop',
    what: 'testing',
    next: () => undefined,
    onError: (err, what) => errors.push(`${what}: ${(err as Error).message}`),
    ...options,
  });
  return { loop, errors };
}

describe('background loop', () => {
  it('runs a pass after start, then every N ms, in the background work of its name, one at a time', async () => {
    let passes = 0;
    let inPass = 0;
    let most = 0;
    const names = new Set<string | undefined>();
    const { loop } = loopOf({
      pass: async () => {
        inPass++;
        most = Math.max(most, inPass);
        names.add(backgroundWork.getStore());
        await new Promise((resolve) => setTimeout(resolve, 5));
        passes++;
        inPass--;
      },
      next: () => 1,
    });
    assert.equal(loop.start(0), true);
    assert.equal(loop.start(0), false, 'a second start does nothing');
    await eventually('five passes', () => passes >= 5);
    await loop.stop();
    assert.equal(most, 1, 'never two passes at once');
    assert.deepEqual([...names], ['test loop']);
  });

  it('a loop with no next pass runs only when woken; a wake-up during a pass brings one more pass after it', async () => {
    let passes = 0;
    let current = gate();
    const { loop } = loopOf({
      pass: async () => {
        passes++;
        await current.opened;
      },
    });
    loop.start(0);
    await eventually('the first pass', () => passes === 1);
    loop.wake();
    loop.wake();
    const first = current;
    current = gate();
    first.open();
    await eventually('the pass a wake-up brought', () => passes === 2);
    current.open();
    await loop.idle();
    await new Promise((resolve) => setTimeout(resolve, 0));
    await loop.idle();
    assert.equal(passes, 2, 'two wake-ups during one pass bring one pass, and nothing comes after it unwoken');
    loop.wake();
    await eventually('the pass of a wake-up while idle', () => passes === 3);
    await loop.stop();
  });

  it('a wake-up does not push back a pass due sooner', async () => {
    let passes = 0;
    const { loop } = loopOf({ pass: async () => void passes++, wakeMs: 60_000 });
    loop.start(0);
    loop.wake(); // due in a minute: the pass due at once stays due at once
    await eventually('the first pass', () => passes === 1);
    await loop.stop();
  });

  it('wakeIn wakes it after a delay', async () => {
    let passes = 0;
    const { loop } = loopOf({ pass: async () => void passes++ });
    loop.start(0);
    await eventually('the first pass', () => passes === 1);
    await loop.idle();
    loop.wakeIn(1);
    await eventually('the pass wakeIn brought', () => passes === 2);
    await loop.stop();
  });

  it('a failed pass is reported to onError, not thrown, and the loop goes on; onSuccess after each pass that worked', async () => {
    let passes = 0;
    let successes = 0;
    const { loop, errors } = loopOf({
      pass: async () => {
        passes++;
        if (passes === 1) throw new Error('the database is away');
        if (passes === 2) throw new Error('still away');
      },
      next: () => 1,
      onSuccess: () => successes++,
    });
    loop.start(0);
    await eventually('a pass that worked', () => successes >= 1);
    await loop.stop();
    assert.deepEqual(errors, ['testing: the database is away', 'testing: still away']);
  });

  it('stop waits for the pass running, and no pass starts after it, woken or due', async () => {
    let passes = 0;
    let ended = false;
    const current = gate();
    const { loop } = loopOf({
      pass: async () => {
        passes++;
        await current.opened;
        ended = true;
      },
      next: () => 0,
    });
    loop.start(0);
    await eventually('the first pass', () => passes === 1);
    assert.equal(loop.stopped, false);
    const stopping = loop.stop();
    assert.equal(loop.stopped, true, 'a pass sees at once that the loop stops');
    loop.wake();
    loop.wakeIn(0);
    let stopped = false;
    void stopping.then(() => (stopped = true));
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.equal(stopped, false, 'stop has not returned before the pass ended');
    current.open();
    await stopping;
    assert.equal(ended, true);
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(passes, 1);
  });

  it('stop before any pass cancels it; the loop starts again after a stop', async () => {
    let passes = 0;
    const { loop } = loopOf({ pass: async () => void passes++ });
    loop.start(0);
    await loop.stop();
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(passes, 0);
    assert.equal(loop.start(0), true);
    await eventually('a pass after the restart', () => passes === 1);
    await loop.stop();
  });
});
