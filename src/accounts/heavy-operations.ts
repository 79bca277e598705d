// How many heavy operations one account runs at once (docs/api.md, "Heavy operations"): bulk
// upserts, tag renames and deletes, and exports each hold a slot of their account while they
// run, at most UGS_HEAVY_OPERATIONS_PER_ACCOUNT of them on every instance together, so that
// one account's bulk work cannot take the database's time (or, on SQLite, its write lock) from
// the others. The slots are rows in the database (heavy-operations.repository.ts, migration
// 0016), never a count in one process's memory: several instances serve one account.
//
// An operation that finds every slot taken waits for one, holding no connection meanwhile
// (each try is a statement of its own), up to a bound, then is refused with 429
// too_many_heavy_operations and Retry-After. This instance's waiters of one account wait in
// line: only the first tries, and a slot given back here wakes it at once; a slot given back
// on another instance is found by trying again, at most POLL_MS later.
//
// A slot is leased: renewed every RENEW_MS while its operation runs, given back when it ends.
// The slot of an instance that died (kill -9, a lost host) frees itself when its lease lapses,
// LEASE_MS at most. Each statement waits for SQLite's write lock as a transaction does
// (singleWrite).
import { AsyncResource } from 'node:async_hooks';
import crypto from 'node:crypto';
import { backgroundWork } from '../foundations/background-work.ts';
import type { DatabaseHandle } from '../db/database.ts';
import { singleWrite } from '../db/transaction.ts';
import { asBulkWork } from '../db/sqlite-write-line.ts';
import { AppError } from '../foundations/errors.ts';
import { heldSlots, releaseSlot, renewSlot, takeSlot } from './heavy-operations.repository.ts';

/** How long a slot stays taken without renewal: how long a dead instance's operations still count. */
export const LEASE_MS = 30_000;
const RENEW_MS = 10_000;
/** The longest pause between two tries of the first waiter (a slot freed on another instance). */
const POLL_MS = 200;
/**
 * How long a request waits for a slot: several 1,000-item upserts of the account in a row, and
 * still within a client's usual 30 s timeout. The command-line tool waits longer (CLI_WAIT_MS).
 */
export const HEAVY_OPERATION_WAIT_MS = 15_000;
/** `ugs import`, `ugs export`, `ugs tags`: an operator's batch work waits its turn rather than fail. */
export const CLI_WAIT_MS = 120_000;
/** What a refused client waits before trying again. */
const RETRY_AFTER_SECONDS = 5;

export type HeavyOperationKind = 'upsert' | 'tag_rename' | 'tag_delete' | 'export';

export interface HeavyOperationLimits {
  /** Heavy operations one account may run at once, on every instance together (UGS_HEAVY_OPERATIONS_PER_ACCOUNT). */
  perAccount: number;
  /** How long an operation waits for a slot before it is refused (the command-line tool waits longer). */
  waitMs: number;
}

/** A slot held by one operation: give it back with HeavyOperations.release. */
export interface HeldSlot {
  accountId: number;
  slot: number;
  holder: string;
}

interface Waiter {
  wake: () => void;
}

export class HeavyOperations {
  /** This instance, in the holder column (each operation adds its own part). */
  private readonly instance = `${process.pid}-${crypto.randomBytes(6).toString('hex')}`;
  private readonly held = new Set<HeldSlot>();
  /** This instance's waiters, per account, in the order they came. */
  private readonly lines = new Map<number, Waiter[]>();
  private renewTimer: NodeJS.Timeout | undefined;
  /** Its own async context: renewals belong to no request. */
  private readonly scope = new AsyncResource('HeavyOperations');

  constructor(
    private readonly database: Pick<DatabaseHandle, 'db' | 'dialect' | 'lockWaitMs'>,
    readonly limits: HeavyOperationLimits,
    private readonly onError: (err: unknown, what: string) => void = () => undefined,
  ) {}

  /** Runs `work` holding one of the account's slots (waiting for one, up to `waitMs`); 429 too_many_heavy_operations when none frees in time. */
  async run<T>(accountId: number, operation: HeavyOperationKind, work: () => Promise<T>, waitMs = this.limits.waitMs): Promise<T> {
    const slot = await this.acquire(accountId, operation, waitMs);
    try {
      // On SQLite its statements let every other write of this process go first (db/sqlite-write-line.ts).
      return await asBulkWork(work);
    } finally {
      await this.release(slot);
    }
  }

  /** One of the account's slots, waited for up to `waitMs`; the caller gives it back with release(). */
  async acquire(accountId: number, operation: HeavyOperationKind, waitMs = this.limits.waitMs): Promise<HeldSlot> {
    const deadline = Date.now() + waitMs;
    let line = this.lines.get(accountId);
    if (!line) this.lines.set(accountId, (line = []));
    let wake: () => void = () => undefined;
    const waiter: Waiter = { wake: () => wake() };
    line.push(waiter);
    try {
      for (let tries = 0; ; tries++) {
        if (line[0] === waiter) {
          const slot = await this.tryTake(accountId, operation);
          if (slot) return slot;
        }
        const left = deadline - Date.now();
        if (left <= 0) throw this.refusal();
        // The first in line tries again soon (another instance may free a slot); the others when woken.
        const pause = line[0] === waiter ? Math.min(POLL_MS, 10 * 2 ** tries) * (0.5 + Math.random()) : left;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(pause, left));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = () => undefined;
      }
    } finally {
      line.splice(line.indexOf(waiter), 1);
      if (line.length === 0) this.lines.delete(accountId);
      else line[0].wake();
    }
  }

  /** Gives the slot back: the next operation of its account can start at once. */
  async release(slot: HeldSlot): Promise<void> {
    if (!this.held.delete(slot)) return;
    if (this.held.size === 0) {
      clearInterval(this.renewTimer);
      this.renewTimer = undefined;
    }
    try {
      await singleWrite(this.database, () => releaseSlot(this.database.db, slot));
    } catch (err) {
      // It frees itself when its lease lapses.
      this.onError(err, 'giving back the slot of a heavy operation');
    }
    this.lines.get(slot.accountId)?.[0]?.wake();
  }

  /** A free slot of the account, taken; undefined when every one is held. */
  private async tryTake(accountId: number, operation: HeavyOperationKind): Promise<HeldSlot | undefined> {
    for (let attempt = 0; attempt < this.limits.perAccount; attempt++) {
      // Wall time, not the service's clock: leases are compared across instances.
      const now = new Date();
      const held = await heldSlots(this.database.db, accountId, now.toISOString());
      let free = 0;
      while (held.has(free)) free++;
      if (free >= this.limits.perAccount) return undefined;
      const slot: HeldSlot = { accountId, slot: free, holder: `${this.instance}-${crypto.randomBytes(4).toString('hex')}` };
      const taken = await singleWrite(this.database, () =>
        takeSlot(this.database.db, { ...slot, operation, now: now.toISOString(), leaseUntil: leaseFrom(now) }),
      );
      if (taken) {
        this.hold(slot);
        return slot;
      }
      // Another operation took that slot between the read and the write: look again.
    }
    return undefined;
  }

  private hold(slot: HeldSlot): void {
    this.held.add(slot);
    if (this.renewTimer) return;
    this.renewTimer = this.scope.runInAsyncScope(() => backgroundWork.run('heavy operations', () => setInterval(() => void this.renew(), RENEW_MS)));
    this.renewTimer.unref();
  }

  private async renew(): Promise<void> {
    const leaseUntil = leaseFrom(new Date());
    for (const slot of this.held) {
      try {
        if (!(await singleWrite(this.database, () => renewSlot(this.database.db, { ...slot, leaseUntil })))) {
          this.onError(new Error('its lease lapsed and another operation took the slot'), 'renewing the slot of a heavy operation');
        }
      } catch (err) {
        this.onError(err, 'renewing the slot of a heavy operation');
      }
    }
  }

  private refusal(): AppError {
    const { perAccount, waitMs } = this.limits;
    return new AppError(
      'too_many_heavy_operations',
      `this account already runs ${perAccount} heavy operation${perAccount === 1 ? '' : 's'} at once (bulk upserts, tag renames and deletes, exports), ` +
        `the most it may, and none ended within ${Math.round(waitMs / 1000)} s; nothing was changed: retry when one has ended`,
      { headers: { 'retry-after': String(RETRY_AFTER_SECONDS) } },
    );
  }
}

function leaseFrom(now: Date): string {
  return new Date(now.getTime() + LEASE_MS).toISOString();
}
