// The primary's WAL position after a write transaction's commit, read in the same breath as
// the commit (docs/api.md, "Reads from replicas"; read-routing.ts records it per account).
//
// Asked for once the commit's answer had reached this process, the position needed a second
// round trip: a primary that died in between (a commit answered, then its connection lost)
// left the position unknown, and the account's page views were held on the primary for 30 s,
// which was gone: 503 for the whole failover. On a loaded host, where a process waits to be
// scheduled before it reads an answer, most failovers of a busy account fell in that gap. So
// while a write transaction runs in `askingCommitPositions`, each `commit` the primary's pool
// sends (FailoverPool) goes as one query with the position's select: the server runs the one
// right after the other and answers both at once, so a commit answered has its position.
import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The position right after a commit returned: past the end of the commit's record. A commit
 * that returned was flushed (every synchronous_commit but `off`), so the flush position is past
 * it; under `off` only the insert position is. The flush position is preferred because it is
 * nearer: the insert position also holds the records other transactions are writing at that
 * moment, which a standby may never receive if the primary dies then.
 */
export const POSITION_AFTER_COMMIT_SQL = `select (case when current_setting('synchronous_commit') = 'off'
      then pg_current_wal_insert_lsn() else pg_current_wal_flush_lsn() end)::text as lsn`;

type Query = (text: string) => Promise<unknown>;
interface Result {
  rows?: { lsn?: string }[];
}

/**
 * The positions asked for after the commits of the running transaction (a retried one commits
 * again). `open` until the transaction ends: work it started that outlives it (a timer, a loop
 * woken) keeps the store, and must not ask for positions nobody reads.
 */
interface Asked {
  open: boolean;
  positions: Promise<string | undefined>[];
}
const asked = new AsyncLocalStorage<Asked>();

/**
 * Runs the transaction; answers its result and the positions asked for after its commits. Any
 * commit sent meanwhile counts, whatever connection sent it: each position is past its own
 * commit, so the largest is past this transaction's.
 */
export async function askingCommitPositions<T>(transaction: () => Promise<T>): Promise<{ result: T; positions: Promise<string | undefined>[] }> {
  const store: Asked = { open: true, positions: [] };
  try {
    const result = await asked.run(store, transaction);
    return { result, positions: store.positions };
  } finally {
    store.open = false;
  }
}

/**
 * What a connection of the primary's pool sends for `commit` (FailoverPool): while a write
 * transaction asks (askingCommitPositions), the commit and the position's select as one query
 * (the simple protocol runs both, the select only if the commit succeeded), answered as the
 * commit alone; else the commit alone.
 */
export function commitAskingPosition(query: Query): Promise<unknown> {
  const store = asked.getStore();
  if (store === undefined || !store.open) return query('commit');
  const both = query(`commit; ${POSITION_AFTER_COMMIT_SQL}`) as Promise<Result[]>;
  const position = both.then((results) => results[1]?.rows?.[0]?.lsn);
  // A commit that failed rejects `both` for its caller; the position is then read by nobody.
  position.catch(() => undefined);
  store.positions.push(position);
  return both.then((results) => results[0]);
}
