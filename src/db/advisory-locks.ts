// PostgreSQL transaction advisory locks taken in a given order, waiting for each as long as a
// caller chooses rather than as long as the statement timeout allows. A blocking
// pg_advisory_xact_lock would be cut off by the statement timeout (a few seconds, meant for
// runaway queries), although a wait for another transaction that holds the same keys is
// expected and ends when that one commits. So each key is tried, never waited for inside a
// statement: the keys are tried in order until one is taken by another transaction, and the
// rest are tried again after a short pause. Only a prefix of the order is ever held while
// waiting, so two callers that use the same order cannot wait on each other in a cycle.
import type { Kysely } from 'kysely';
import { sql } from './kysely.ts';
import type { Database } from './schema.ts';
import { backoffMs } from './sqlite-lock.ts';

/**
 * Takes `(lockClass, key)` for each key in the order given, waiting up to `waitMs` in all;
 * false when the wait ran out (the locks taken so far stay held until the transaction ends).
 */
export async function advisoryLocksInOrder(trx: Kysely<Database>, lockClass: number, keys: readonly number[], waitMs: number): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  let held = 0;
  for (let tries = 0; held < keys.length; tries++) {
    if (tries > 0) {
      if (Date.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, backoffMs(tries, deadline)));
    }
    held += await tryPrefix(trx, lockClass, keys.slice(held));
  }
  return true;
}

/** How many of `keys`, from the first, one statement took: it stops at the first one another transaction holds. */
async function tryPrefix(trx: Kysely<Database>, lockClass: number, keys: readonly number[]): Promise<number> {
  // A recursive query takes one key per step, and a step that fails ends the recursion.
  const { rows } = await sql<{ held: number | string }>`with recursive step(n, taken) as (
      select 0, true
      union all
      select n + 1, pg_try_advisory_xact_lock(${sql.lit(lockClass)}, (${keys}::int4[])[n + 1]) from step where taken and n < ${keys.length}
    ) select count(*) - 1 as held from step where taken`.execute(trx);
  return Number(rows[0].held);
}
