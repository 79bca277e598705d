// The lease by which one instance at a time works on a webhook endpoint (dispatcher.ts): a
// compare-and-swap on the endpoint's row, taken, renewed and given back each by a statement of
// its own, outside any transaction.
//
// On SQLite such a statement found the file's write lock held whenever another process was
// writing (connections have no busy timeout: sqlite-lock.ts), and failed at once: a release
// that failed so left the endpoint held for the lease's 30 s, and under two instances' writes
// that happened every few runs. So each statement waits for the lock as a transaction does.
// One that still fails (the lock held past the wait, PostgreSQL's statement timeout, a
// connection lost) leaves a lease that only this instance holds: it takes it back at once
// (dueEndpoints), rather than after the lease runs out.
import crypto from 'node:crypto';
import type { DatabaseHandle } from '../db/database.ts';
import { singleWrite } from '../db/transaction.ts';
import { claimEndpoint, releaseLease, renewLease } from './webhooks.repository.ts';

/** A lease outlives one attempt (15 s at most) with room to spare, and is renewed every third of it. */
export const LEASE_MS = 30_000;

export class EndpointLeases {
  /** This instance, in the lease columns. */
  readonly owner = `${process.pid}-${crypto.randomBytes(6).toString('hex')}`;

  constructor(
    private readonly handle: DatabaseHandle,
    private readonly now: () => Date,
  ) {}

  /** Takes the endpoint if no other instance's live lease holds it; true if this instance now holds it. */
  claim(endpointId: number): Promise<boolean> {
    const now = this.now();
    return this.write(() => claimEndpoint(this.handle.db, endpointId, this.owner, now.toISOString(), this.until(now)));
  }

  /** Extends this instance's lease; false if it was lost (expired and taken, or the endpoint deleted). */
  renew(endpointId: number): Promise<boolean> {
    return this.write(() => renewLease(this.handle.db, endpointId, this.owner, this.until(this.now())));
  }

  /** Gives the endpoint back; `nextAttemptAt`: when it is due again (unchanged if absent). */
  release(endpointId: number, nextAttemptAt?: string): Promise<void> {
    return this.write(() => releaseLease(this.handle.db, endpointId, this.owner, nextAttemptAt));
  }

  private until(now: Date): string {
    return new Date(now.getTime() + LEASE_MS).toISOString();
  }

  private write<T>(statement: () => Promise<T>): Promise<T> {
    return singleWrite(this.handle, statement);
  }
}
