// SQLite: one write connection per process, and a heavy operation's statements wait for it
// behind every other write (docs/api.md, "Heavy operations"; src/db/sqlite-write-line.ts):
// another account's create waits at most for the bulk part that holds the connection, never
// for the parts queued before it.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { openTestDatabase } from './helpers/harness.ts';
import { inTransaction } from '../src/db/transaction.ts';
import { asBulkWork } from '../src/db/sqlite-write-line.ts';
import { sql } from '../src/db/kysely.ts';

it('SQLite: writes queued for the connection go before the bulk work queued ahead of them, each kind in the order it came', async () => {
  const database = await openTestDatabase('sqlite');
  try {
    const order: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    // A transaction holds the connection until the gate opens; the others queue meanwhile.
    const holder = inTransaction(database.handle, async (trx) => {
      await sql`select 1`.execute(trx);
      holding();
      await gate;
      order.push('holder');
    });
    await held;
    const write = (name: string) =>
      inTransaction(database.handle, async (trx) => {
        await sql`select 1`.execute(trx);
        order.push(name);
      });
    const queued = [
      asBulkWork(() => write('bulk 1')),
      asBulkWork(() => write('bulk 2')),
      write('single 1'),
      asBulkWork(() => write('bulk 3')),
      write('single 2'),
    ];
    open();
    await Promise.all([holder, ...queued]);
    assert.deepEqual(order, ['holder', 'single 1', 'single 2', 'bulk 1', 'bulk 2', 'bulk 3']);
  } finally {
    await database.close();
  }
});
