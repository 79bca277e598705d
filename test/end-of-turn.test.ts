// The end-of-turn queue (src/foundations/end-of-turn.ts): work added while it drains runs in the same pass,
// which is what lets a lookup asked for by a just-read GET body join the same batch.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { atEndOfTurn } from '../src/foundations/end-of-turn.ts';

describe('end of turn', () => {
  it('runs work after the current turn, and work added while draining in the same pass, before the next setImmediate', async () => {
    const order: string[] = [];
    const done = new Promise<void>((resolve) => {
      atEndOfTurn(() => {
        order.push('first');
        setImmediate(() => {
          order.push('next setImmediate');
          resolve();
        });
        atEndOfTurn(() => order.push('added while draining'));
      });
      atEndOfTurn(() => order.push('second'));
      order.push('synchronous');
    });
    await done;
    assert.deepEqual(order, ['synchronous', 'first', 'second', 'added while draining', 'next setImmediate']);
  });
});
