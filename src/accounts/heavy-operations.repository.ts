// The SQL of the heavy operations' slots (migration 0016; heavy-operations.ts): each statement
// names its account, and each is a statement of its own, outside any transaction.
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';

/** The account's slots whose lease has not lapsed. */
export async function heldSlots(db: Kysely<Database>, accountId: number, now: string): Promise<Set<number>> {
  const rows = await db.selectFrom('heavy_operations').select('slot').where('account_id', '=', accountId).where('lease_until', '>', now).execute();
  return new Set(rows.map((row) => Number(row.slot)));
}

/**
 * Takes `slot` of the account if it is free (no row, or a lapsed lease): a compare-and-swap,
 * so that of two takers of one slot, on any instances, one gets it. True if this one did.
 */
export async function takeSlot(
  db: Kysely<Database>,
  slot: { accountId: number; slot: number; holder: string; operation: string; now: string; leaseUntil: string },
): Promise<boolean> {
  const taken = await db
    .insertInto('heavy_operations')
    .values({
      account_id: slot.accountId,
      slot: slot.slot,
      holder: slot.holder,
      operation: slot.operation,
      started_at: slot.now,
      lease_until: slot.leaseUntil,
    })
    .onConflict((conflict) =>
      conflict
        .columns(['account_id', 'slot'])
        .doUpdateSet((eb) => ({
          holder: eb.ref('excluded.holder'),
          operation: eb.ref('excluded.operation'),
          started_at: eb.ref('excluded.started_at'),
          lease_until: eb.ref('excluded.lease_until'),
        }))
        .where('heavy_operations.lease_until', '<=', slot.now),
    )
    .returning('slot')
    .executeTakeFirst();
  return taken !== undefined;
}

/** Moves the lease of a slot this holder has on to `leaseUntil`; false when it no longer has it. */
export async function renewSlot(db: Kysely<Database>, slot: { accountId: number; slot: number; holder: string; leaseUntil: string }): Promise<boolean> {
  const renewed = await db
    .updateTable('heavy_operations')
    .set({ lease_until: slot.leaseUntil })
    .where('account_id', '=', slot.accountId)
    .where('slot', '=', slot.slot)
    .where('holder', '=', slot.holder)
    .returning('slot')
    .executeTakeFirst();
  return renewed !== undefined;
}

/** Gives a slot back, if this holder still has it. */
export async function releaseSlot(db: Kysely<Database>, slot: { accountId: number; slot: number; holder: string }): Promise<void> {
  await db.deleteFrom('heavy_operations').where('account_id', '=', slot.accountId).where('slot', '=', slot.slot).where('holder', '=', slot.holder).execute();
}
