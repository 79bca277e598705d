// The bulk upsert (docs/api.md, "POST /api/users/upsert"): many groups created or changed in
// one call, each item in order, in parts of UPSERT_PART items, each part its own transaction
// (upsert-chunk.ts). Short transactions let other writes in between: on SQLite, where one
// transaction writes at a time, a call of 1,000 items held every other write of every account
// for as long as it ran (and, statement after statement, the event loop: db/between-statements.ts).
// Each item is all or nothing, and its outcome says what became of it.
// The call runs as one of its account's heavy operations (accounts/heavy-operations.ts).
import { inTransaction } from '../db/transaction.ts';
import { givingTurns } from '../db/between-statements.ts';
import { isDatabaseUnavailable, isLockTimeout, storageFault } from '../db/errors.ts';
import { AppError } from '../foundations/errors.ts';
import { lockTimeout, storageUnavailable } from '../http/error-handler.ts';
import type { UserGroupInput } from './user-groups.schemas.ts';
import type { Actor } from '../audit/audit.repository.ts';
import type { Principal } from '../auth/principal.ts';
import { checkProperties } from './stored-fields.ts';
import { keyFor, type UserGroupDeps } from './user-groups.service.ts';
import { upsertChunk, type CheckResult, type UpsertOutcome } from './upsert-chunk.ts';
import { existingProvidedIds } from './user-groups.repository.ts';

export type { UpsertOutcome } from './upsert-chunk.ts';

/** Items per transaction: long enough that a commit is a small part of its cost, short enough that other writes wait little. */
export const UPSERT_PART = 100;
/**
 * PostgreSQL: items per transaction when each of them creates a new group without parent, level
 * or tags (partsOf). Such a part locks no existing row and no tenant's hierarchy: what it holds
 * meanwhile is its new ids (and the buckets of identities of its account, which only the
 * account's own upserts, two at most, take), so a longer part makes no other write wait, and
 * its cost is in the rows rather than in each part's statements, commit and sequencing: 500
 * rows are one insert of groups and one batch of the event sequencer.
 */
export const UPSERT_CREATE_PART = 500;

/**
 * Creates each item that is missing and gives each existing one the fields it names (absent
 * fields stay, as in PUT), in order: an item may name as parent a group an earlier item
 * created. An item that breaks a rule changes nothing and is answered `failed` with the code a
 * single call would get; the others go on. A part that cannot be written (the database
 * unavailable, a lock held too long) once an earlier part is committed is answered `failed`
 * item by item with that code, and the parts after it are not tried; before any is committed,
 * it is the call's error, and nothing changed.
 */
export async function upsertUserGroups(
  deps: UserGroupDeps,
  principal: Principal,
  actor: Actor,
  items: readonly unknown[],
  validateItem: (item: unknown) => UserGroupInput,
): Promise<UpsertOutcome[]> {
  const at = deps.now();
  const checked = items.map((raw) => checkItem(principal, raw, validateItem));
  return deps.heavyOperations.run(principal.accountId, 'upsert', async () => {
    const outcomes: UpsertOutcome[] = [];
    let committed = false;
    const ends = deps.database.dialect === 'postgres' ? partsOf(checked, await plainCreates(deps, checked)) : fixedParts(checked.length);
    let start = 0;
    for (const end of ends) {
      const part = checked.slice(start, end);
      let done: UpsertOutcome[];
      try {
        done = part.every((entry) => 'error' in entry)
          ? part.map((entry) => (entry as { failed: UpsertOutcome }).failed)
          : await inTransaction(deps.database, (trx) => upsertChunk(givingTurns(trx, deps.database.dialect), deps, part, actor, at));
      } catch (err) {
        const stop = committed ? stoppedBy(err) : undefined;
        if (!stop) throw err;
        for (const entry of checked.slice(start)) outcomes.push('error' in entry ? entry.failed : { ...identityOf(entry), status: 'failed', error: stop });
        break;
      }
      committed ||= done.some((outcome) => outcome.status !== 'failed' && outcome.status !== 'unchanged');
      outcomes.push(...done);
      for (const outcome of done) if (outcome.status === 'created') deps.events.userGroupTokenIssued('upsert');
      // Other writes waiting for the database (on SQLite, for its one write lock) go first.
      if (end < checked.length) await new Promise((resolve) => setImmediate(resolve));
      start = end;
    }
    return outcomes;
  });
}

/** Where each part of `count` items ends: every UPSERT_PART items. */
function fixedParts(count: number): number[] {
  const ends: number[] = [];
  for (let end = UPSERT_PART; end < count + UPSERT_PART; end += UPSERT_PART) ends.push(Math.min(end, count));
  return ends;
}

/**
 * PostgreSQL: where each part ends. A run of at least UPSERT_PART items that each create a
 * plain group (`plain`, read before the parts) is one part of up to UPSERT_CREATE_PART; any
 * other part has UPSERT_PART items at most. A group another call creates meanwhile only makes
 * its item an update inside its part, as in any part.
 */
function partsOf(checked: readonly CheckResult[], plain: readonly boolean[]): number[] {
  const ends: number[] = [];
  for (let start = 0; start < checked.length; ) {
    let end = start;
    while (end < checked.length && end - start < UPSERT_CREATE_PART && plain[end]) end++;
    if (end - start < UPSERT_PART) end = Math.min(checked.length, start + UPSERT_PART);
    ends.push(end);
    start = end;
  }
  return ends;
}

/**
 * Per item, whether it creates a group without parent, level or tags, as far as a read without
 * locks of which ids exist tells (an item that failed its checks writes nothing: it counts as
 * one). One statement per environment the items name.
 */
async function plainCreates(deps: UserGroupDeps, checked: readonly CheckResult[]): Promise<boolean[]> {
  const existing = new Map<string, Set<string>>();
  for (const environment of ['Customer', 'Testing'] as const) {
    const ofEnvironment = checked.flatMap((entry) => ('error' in entry || entry.key.environment !== environment ? [] : [entry.key]));
    if (ofEnvironment.length === 0) continue;
    existing.set(
      environment,
      await existingProvidedIds(
        deps.database.db,
        { accountId: ofEnvironment[0].accountId, environment },
        ofEnvironment.map((key) => key.providedId),
      ),
    );
  }
  return checked.map(
    (entry) =>
      'error' in entry ||
      (!existing.get(entry.key.environment)?.has(entry.key.providedId) &&
        (entry.item.parent_user_group_id ?? null) === null &&
        (entry.item.hierarchy_level ?? null) === null &&
        entry.item.group_tags === undefined),
  );
}

/**
 * Why the rest of a call cannot be done, once a part of it is committed, as the code and
 * message its items fail with: what the call would have answered (docs/api.md, "Errors"). An
 * unexpected error is not among them: it answers 500, and is logged.
 */
function stoppedBy(err: unknown): { code: string; message: string } | undefined {
  const error =
    err instanceof AppError
      ? err
      : isLockTimeout(err)
        ? lockTimeout()
        : storageFault(err)
          ? storageUnavailable(storageFault(err)!)
          : isDatabaseUnavailable(err)
            ? new AppError('unavailable', 'the database is unavailable; retry shortly')
            : undefined;
  return error && { code: error.code, message: `${error.message} (the items before this one were done; this one and the rest were not)` };
}

const identityOf = ({ key }: { key: { providedId: string; environment: UpsertOutcome['api_environment_tag'] } }) => ({
  user_group_id: key.providedId,
  api_environment_tag: key.environment,
});

/**
 * What upsertUserGroups would answer `failed` before it reads the database, per item (undefined:
 * the item passes these checks): the same check of each item on its own. A dry run's answer;
 * the rules that need the database (the parent exists, no cycle, depth, levels) are not in it.
 */
export function precheckUpsertItems(
  principal: Principal,
  items: readonly unknown[],
  validateItem: (item: unknown) => UserGroupInput,
): (UpsertOutcome | undefined)[] {
  return items.map((raw) => {
    const checked = checkItem(principal, raw, validateItem);
    return 'error' in checked ? checked.failed : undefined;
  });
}

function checkItem(principal: Principal, raw: unknown, validateItem: (item: unknown) => UserGroupInput): CheckResult {
  try {
    const item = validateItem(raw);
    checkProperties(item.properties);
    return { key: keyFor(principal, item), item };
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    return { error: true, failed: failedItem(principal, raw, err) };
  }
}

function failedItem(principal: Principal, raw: unknown, err: AppError): UpsertOutcome {
  return { ...itemIdentity(principal, raw), status: 'failed', error: { code: err.code, message: err.message } };
}

/** How a result names an item, even one too broken to validate. */
function itemIdentity(principal: Principal, raw: unknown): Pick<UpsertOutcome, 'user_group_id' | 'api_environment_tag'> {
  const item = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  const id = item.user_group_id;
  const environment = item.api_environment_tag;
  return {
    user_group_id: typeof id === 'string' || typeof id === 'number' ? String(id) : '',
    api_environment_tag: environment === 'Customer' || environment === 'Testing' ? environment : (principal.allowedEnvironment ?? principal.defaultEnvironment),
  };
}
