// `ugs events tail`: an account's change events as they are sequenced, read from the database
// with the feed's own reads (docs/api.md, "Change events"). The command-line tool works on the
// database as an operator, like its other commands: no API token, every environment unless
// told one. The events are numbered by a running server's sequencer: with none running, the
// tail waits.
import type { DatabaseHandle } from '../db/database.ts';
import type { Environment } from '../db/schema.ts';
import type { Principal } from '../auth/principal.ts';
import { AppError } from '../foundations/errors.ts';
import { findAccountBySlug } from '../accounts/accounts.repository.ts';
import { eventJson } from './events.json.ts';
import { parseEventTypes, startingPoint } from './events.service.ts';
import { eventsAfter } from './events.repository.ts';
import type { ChangeEventJson } from './events.schemas.ts';

export interface TailInput {
  accountSlug: string;
  environment: Environment | null;
  types?: string;
  /** An event id; absent: from the head (only new events). */
  after?: string;
  pollMs: number;
  signal: AbortSignal;
  /** Called once the starting point is read, with the event id after which events are written: from then on nothing is missed. */
  onFollowing?: (afterEventId: number) => void;
}

/** Calls `write` with each event after the starting point, in order, until `signal` aborts. */
export async function tailEvents(database: DatabaseHandle, input: TailInput, write: (event: ChangeEventJson) => void): Promise<void> {
  const account = await findAccountBySlug(database.db, input.accountSlug);
  if (!account) throw new AppError('validation_failed', `no account "${input.accountSlug}" (see: ugs account list)`);
  const types = parseEventTypes(input.types);
  // The operator reads as a read-only token of the account would, restricted to --environment if given.
  const operator: Principal = {
    tokenId: 0,
    tokenHash: '',
    accountId: Number(account.id),
    scopes: new Set(['read']),
    allowedEnvironment: input.environment,
    defaultEnvironment: input.environment ?? 'Customer',
    expiresAt: null,
  };
  const start = await startingPoint(database, operator, input.after);
  let cursor = input.after === undefined ? start.lastSeq : start.afterSeq;
  input.onFollowing?.(cursor);
  while (!input.signal.aborted) {
    const rows = await eventsAfter(database.db, { accountId: operator.accountId, environment: input.environment, afterSeq: cursor, limit: 500, types });
    for (const row of rows) {
      cursor = Number(row.seq);
      write(eventJson(row, account.slug));
    }
    if (rows.length < 500) await sleep(input.pollMs, input.signal);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
