// The locks a part of a bulk upsert (upsert-chunk.ts) takes before it touches any row, so that
// two upserts naming the same groups in different orders (or one group's parent and the group)
// cannot deadlock (docs/api.md, "POST /api/users/upsert"). Items are then done in the request's
// order, as the API promises, but every lock they need is already held, or held by no other
// upsert. They are held until the part commits.
//
// Row locks cannot be taken in a canonical order for groups that do not exist yet, and two
// calls that create the same new ids in opposite orders wait on each other's uncommitted
// inserts just as they would on row locks. So an upsert locks the identities it names (its
// items' ids and the parents they name) with transaction advisory locks, in ascending key
// order, after the hierarchy lock of each tenant where an item moves the hierarchy (taken
// before any other lock, as every write does: hierarchy.repository.ts). Two upserts that
// share an identity then take turns, part by part; no other lock order remains between them.
// The later one waits by polling (db/advisory-locks.ts), up to UPSERT_LOCK_WAIT_MS.
//
// An identity's lock is one of IDENTITY_LOCK_BUCKETS per tenant, not one per id: advisory
// locks live in PostgreSQL's shared lock table (max_locks_per_transaction × max_connections
// entries, 6,400 by default), and large parts on every connection would fill it and fail every
// transaction of the server. A shared bucket only makes two calls wait for each other.
//
// SQLite needs none of this: BEGIN IMMEDIATE already runs one write transaction at a time.
import crypto from 'node:crypto';
import type { Kysely } from 'kysely';
import { advisoryLocksInOrder } from '../db/advisory-locks.ts';
import { lockTimeout } from '../http/error-handler.ts';
import type { Database } from '../db/schema.ts';
import type { Dialect } from '../db/database.ts';
import { scopeOf } from '../db/tenant.ts';
import { lockHierarchy } from './hierarchy/hierarchy.repository.ts';
import type { GroupIdentity } from './user-groups.repository.ts';

const IDENTITY_LOCK_CLASS = 726_415_003; // arbitrary, fixed: "ugs group identities" (…001 migrations, …002 hierarchy)
const IDENTITY_LOCK_BUCKETS = 64;
/**
 * How long a part waits for other calls' parts on the same groups (a tag's rename, holding the
 * environment's lock batch after batch, among them), and still within a client's usual 30 s
 * timeout.
 */
const UPSERT_LOCK_WAIT_MS = 15_000;

/** What an upsert item names: its identity, the parent it gives (null: none), and whether it moves the hierarchy. */
export interface UpsertTarget {
  key: GroupIdentity;
  parentProvidedId: string | null;
  locksTenant: boolean;
}

/**
 * Takes, in the caller's transaction, every lock the targets' items may need, in the one order
 * every upsert uses; answers 429 lock_timeout when other calls hold them past the wait.
 */
export async function lockUpsertTargets(trx: Kysely<Database>, dialect: Dialect, targets: readonly UpsertTarget[]): Promise<void> {
  if (dialect !== 'postgres' || targets.length === 0) return;
  const hierarchies = new Map(targets.filter((t) => t.locksTenant).map((t) => [scopeOf(t.key), t.key]));
  for (const scope of [...hierarchies.keys()].sort()) await lockHierarchy(trx, dialect, hierarchies.get(scope)!);
  const tenantRanges = new Map<string, number>();
  const keys = new Set<number>();
  const add = (key: GroupIdentity) => {
    const scope = scopeOf(key);
    let range = tenantRanges.get(scope);
    if (range === undefined) tenantRanges.set(scope, (range = hash(scope) & ~(IDENTITY_LOCK_BUCKETS - 1)));
    keys.add(range | ((hash(key.providedId) >>> 0) % IDENTITY_LOCK_BUCKETS));
  };
  for (const { key, parentProvidedId } of targets) {
    add(key);
    if (parentProvidedId !== null) add({ ...key, providedId: parentProvidedId });
  }
  const ascending = [...keys].sort((a, b) => a - b);
  if (!(await advisoryLocksInOrder(trx, IDENTITY_LOCK_CLASS, ascending, UPSERT_LOCK_WAIT_MS))) {
    throw lockTimeout(`other calls held these user groups for ${UPSERT_LOCK_WAIT_MS / 1000} s`);
  }
}

/** 32 bits of a text's SHA-256, signed as a PostgreSQL int4. The tenant picks a range of keys, the id one of its buckets: tenants almost never share a key. */
function hash(text: string): number {
  return crypto.createHash('sha256').update(text).digest().readInt32BE(0);
}
