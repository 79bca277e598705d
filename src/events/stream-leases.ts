// How many event streams may be open at once (docs/api.md, "The stream"; docs/security.md,
// "Limits on open event streams"): per API token and per account, across every instance. Each
// open stream holds a lease row in the database (event-streams.repository.ts), counted when
// another one opens: an instance's own memory could not bound what a token opens on the others.
//
// The instance serving a stream renews its lease every RENEW_MS for LEASE_MS and deletes it
// when the stream ends. A stream of an instance that died (kill -9, a lost host) still counts
// until its lease lapses, LEASE_MS at most. Renewals and deletions are single statements that
// wait for SQLite's write lock as transactions do (singleWrite): failing at once while another
// process writes, a closed stream's slot stayed taken until its lease lapsed.
import { BackgroundLoop } from '../foundations/background-loop.ts';
import type { DatabaseHandle } from '../db/database.ts';
import { inTransaction, singleWrite } from '../db/transaction.ts';
import { AppError } from '../foundations/errors.ts';
import type { Principal } from '../auth/principal.ts';
import { countOpenStreams, deleteLapsedStreams, deleteStream, insertStream, lockAccountStreams, renewStreams } from './event-streams.repository.ts';

/** How long a lease lasts without renewal: how long a dead instance's streams still count. */
export const LEASE_MS = 30_000;
const RENEW_MS = 10_000;
/** What a refused client waits before trying again: a slot frees when a stream ends. */
const RETRY_AFTER_SECONDS = 5;

export interface StreamLimits {
  /** Streams one API token may have open at once (UGS_EVENT_STREAMS_PER_TOKEN). */
  perToken: number;
  /** Streams all the API tokens of one account may have open at once (UGS_EVENT_STREAMS_PER_ACCOUNT). */
  perAccount: number;
}

export interface StreamLease {
  accountId: number;
  id: number;
}

export interface StreamLeaseOptions {
  onError: (err: unknown, what: string) => void;
  onSuccess?: () => void;
}

/** The leases of this instance's open streams: taken under the limits, renewed, given back. */
export class StreamLeases {
  /** account → the ids of its leases this instance holds. */
  private readonly held = new Map<number, Set<number>>();
  private readonly releasing = new Set<Promise<void>>();
  /** Renews the leases every RENEW_MS. */
  private readonly loop: BackgroundLoop;

  constructor(
    private readonly database: DatabaseHandle,
    private readonly limits: StreamLimits,
    private readonly options: StreamLeaseOptions,
  ) {
    this.loop = new BackgroundLoop({
      name: 'event streams',
      what: 'renewing the leases of event streams',
      pass: () => this.renew(),
      next: () => RENEW_MS,
      onError: options.onError,
      onSuccess: options.onSuccess,
    });
  }

  /** A lease for one more stream of the principal's token, or 429 too_many_streams when a limit is reached. */
  async acquire(principal: Principal): Promise<StreamLease> {
    const { accountId, tokenId } = principal;
    // Wall time, not the service's clock: leases are compared across instances.
    const now = new Date();
    const id = await inTransaction(this.database, async (trx) => {
      await lockAccountStreams(trx, this.database.dialect, accountId);
      await deleteLapsedStreams(trx, accountId, now.toISOString());
      const open = await countOpenStreams(trx, accountId, tokenId, now.toISOString());
      if (open.token >= this.limits.perToken)
        throw tooMany(`this API token has ${open.token} event streams open, the most one token may have (${this.limits.perToken})`);
      if (open.account >= this.limits.perAccount)
        throw tooMany(`this account has ${open.account} event streams open, the most one account may have (${this.limits.perAccount})`);
      return insertStream(trx, { accountId, apiTokenId: tokenId, openedAt: now.toISOString(), leaseUntil: leaseFrom(now) });
    });
    let ids = this.held.get(accountId);
    if (!ids) this.held.set(accountId, (ids = new Set()));
    ids.add(id);
    return { accountId, id };
  }

  /** The stream ended: its slot is free for the next one (at once, unless the database cannot be reached: then when the lease lapses). */
  release(lease: StreamLease): void {
    const ids = this.held.get(lease.accountId);
    if (!ids?.delete(lease.id)) return;
    if (ids.size === 0) this.held.delete(lease.accountId);
    const deleting = singleWrite(this.database, () => deleteStream(this.database.db, lease.accountId, lease.id)).catch((err) =>
      this.options.onError(err, 'closing an event stream'),
    );
    this.releasing.add(deleting);
    void deleting.finally(() => this.releasing.delete(deleting));
  }

  start(): void {
    this.loop.start(RENEW_MS);
  }

  /** Stops renewing, and waits for the renewal running and the leases being given back (the streams end first). */
  async stop(): Promise<void> {
    await this.loop.stop();
    await Promise.all(this.releasing);
  }

  private async renew(): Promise<void> {
    const leaseUntil = leaseFrom(new Date());
    for (const [accountId, ids] of this.held) await singleWrite(this.database, () => renewStreams(this.database.db, accountId, [...ids], leaseUntil));
  }
}

function leaseFrom(now: Date): string {
  return new Date(now.getTime() + LEASE_MS).toISOString();
}

function tooMany(what: string): AppError {
  return new AppError('too_many_streams', `${what}: close one before opening another (one stream per process is enough)`, {
    headers: { 'retry-after': String(RETRY_AFTER_SECONDS) },
  });
}
