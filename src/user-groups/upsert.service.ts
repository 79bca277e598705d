// The bulk upsert (docs/api.md, "POST /api/users/upsert"): many groups created or changed in
// one transaction, each item in order, under the locks every item may need, taken before the
// first (upsert-locks.ts). Each item is written by the same steps as a single create or
// PUT (insertNewIn, updateIn in user-groups.service.ts), so it follows the same rules and
// gets the same error a single call would.
import type { Database, Environment, UserGroupRow } from '../db/schema.ts';
import type { Kysely } from 'kysely';
import { inTransaction } from '../db/transaction.ts';
import { sql } from '../db/kysely.ts';
import { AppError } from '../foundations/errors.ts';
import type { UserGroupInput } from './user-groups.schemas.ts';
import { appendAudits, type Actor, type AuditDetails, type AuditEntry } from '../audit/audit.repository.ts';
import { generateToken } from '../auth/token-format.ts';
import { requireScope, type Principal } from '../auth/principal.ts';
import { existingProvidedIds, findUserGroupForUpdate, insertUserGroupsIfAbsent, type GroupIdentity } from './user-groups.repository.ts';
import { insertTagRowsOfNewGroups } from './hierarchy.repository.ts';
import { checkProperties, storedFields } from './user-group-fields.ts';
import { lockUpsertTargets, type UpsertTarget } from './upsert-locks.ts';
import { auditEntry, insertNewIn, keyFor, newGroupRow, parentChoice, tagsOf, updateIn, type UserGroupDeps } from './user-groups.service.ts';

/** One item's outcome in a bulk upsert (docs/api.md, "POST /api/users/upsert"). */
export interface UpsertOutcome {
  user_group_id: string;
  api_environment_tag: Environment;
  status: 'created' | 'updated' | 'unchanged' | 'failed';
  team_id?: number;
  /** The new group's token: for `created` only. */
  token?: string;
  error?: { code: string; message: string };
}

/**
 * Creates each item that is missing and gives each existing one the fields it names (absent
 * fields stay, as in PUT), in order, in one transaction: an item may name as parent a group an
 * earlier item created. An item that breaks a rule is rolled back to its savepoint and
 * answered `failed` with the code a single call would get; the others go on. One commit for
 * the whole call is what makes it many times faster than one call per group.
 */
export async function upsertUserGroups(
  deps: UserGroupDeps,
  principal: Principal,
  actor: Actor,
  items: readonly unknown[],
  validateItem: (item: unknown) => UserGroupInput,
): Promise<UpsertOutcome[]> {
  requireScope(principal, 'write', 'upserting user groups');
  const at = deps.now();
  const checked = items.map((raw) => checkItem(principal, raw, validateItem));
  const outcomes = await inTransaction(deps.database, async (trx) => {
    await lockUpsertTargets(
      trx,
      deps.database.dialect,
      checked.flatMap((item) => ('error' in item ? [] : [upsertTarget(item)])),
    );
    const outcomes: UpsertOutcome[] = new Array(items.length);
    const audits: AuditEntry[] = [];
    const plain = await plainNewItems(trx, checked);
    // A run of plain new groups is inserted at once, in order with the items around it.
    let run: number[] = [];
    const flush = async () => {
      if (run.length === 0) return;
      const inserted = await insertPlainGroupsWithinTagBound(
        trx,
        deps,
        run.map((index) => checked[index] as CheckedItem),
        at,
        actor,
      );
      if (inserted === undefined) {
        // Their new tags would pass the environment's bound: each on its own, so that only the
        // items that add a tag past it fail (tag_limit_reached) and the others go on.
        for (const index of run) outcomes[index] = await upsertSaved(trx, deps, checked[index] as CheckedItem, actor, at, audits);
        run = [];
        return;
      }
      for (const [position, index] of run.entries()) {
        const done = inserted[position];
        if (done) {
          audits.push(done.audit);
          outcomes[index] = created(checked[index] as CheckedItem, done.row, done.token);
        } else {
          // Another transaction created it meanwhile (PostgreSQL): change it as it now is.
          outcomes[index] = await upsertSaved(trx, deps, checked[index] as CheckedItem, actor, at, audits);
        }
      }
      run = [];
    };
    for (const [index, item] of checked.entries()) {
      if (plain.has(index)) {
        run.push(index);
        continue;
      }
      await flush();
      outcomes[index] = 'error' in item ? item.failed : await upsertSaved(trx, deps, item, actor, at, audits);
    }
    await flush();
    await appendAudits(trx, audits);
    return outcomes;
  });
  for (const outcome of outcomes) if (outcome.status === 'created') deps.events.userGroupTokenIssued('upsert');
  return outcomes;
}

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
  requireScope(principal, 'write', 'upserting user groups');
  return items.map((raw) => {
    const checked = checkItem(principal, raw, validateItem);
    return 'error' in checked ? checked.failed : undefined;
  });
}

/** An item checked on its own before the transaction: its identity and fields, or its failure. */
type CheckedItem = { key: GroupIdentity; item: UserGroupInput };
type CheckResult = CheckedItem | { error: true; failed: UpsertOutcome };

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

/** What an item will lock (upsert-locks.ts): a superset of what insertNewIn and updateIn take. */
function upsertTarget({ key, item }: CheckedItem): UpsertTarget {
  const parent = parentChoice(item);
  return {
    key,
    parentProvidedId: parent.given ? parent.providedId : null,
    // Setting tags takes the same tenant lock (group-tags/: a rename or delete of a tag holds it).
    locksTenant: parent.given || item.hierarchy_level !== undefined || item.group_tags !== undefined,
  };
}

function failedItem(principal: Principal, raw: unknown, err: AppError): UpsertOutcome {
  return { ...itemIdentity(principal, raw), status: 'failed', error: { code: err.code, message: err.message } };
}

function created({ key }: CheckedItem, row: UserGroupRow, token?: string): UpsertOutcome {
  return { user_group_id: key.providedId, api_environment_tag: key.environment, status: 'created', team_id: row.team_id, ...(token ? { token } : {}) };
}

/**
 * The items that create a group with nothing the hierarchy must check: no parent, no level,
 * an identity that does not exist yet and that no earlier item of the call names. Such a
 * group can fail no rule once its fields are valid but the bound of its environment's tags,
 * so many are inserted in one statement (each on its own when that bound is passed).
 */
async function plainNewItems(trx: Kysely<Database>, checked: readonly CheckResult[]): Promise<Set<number>> {
  const candidates = new Map<string, number>();
  const seen = new Set<string>();
  for (const [index, item] of checked.entries()) {
    if ('error' in item) continue;
    const identity = `${item.key.environment}/${item.key.providedId}`;
    const plain = (item.item.parent_user_group_id ?? null) === null && (item.item.hierarchy_level ?? null) === null;
    if (plain && !seen.has(identity)) candidates.set(identity, index);
    seen.add(identity);
  }
  const plain = new Set<number>();
  for (const environment of ['Customer', 'Testing'] as const) {
    const ofEnvironment = [...candidates.values()].filter((index) => (checked[index] as CheckedItem).key.environment === environment);
    if (ofEnvironment.length === 0) continue;
    const { accountId } = (checked[ofEnvironment[0]] as CheckedItem).key;
    const existing = await existingProvidedIds(
      trx,
      { accountId, environment },
      ofEnvironment.map((index) => (checked[index] as CheckedItem).key.providedId),
    );
    for (const index of ofEnvironment) if (!existing.has((checked[index] as CheckedItem).key.providedId)) plain.add(index);
  }
  return plain;
}

/** insertPlainGroups in a savepoint; undefined, and nothing written, when the groups' new tags would pass their environment's bound (user-groups/tag-set.ts). */
async function insertPlainGroupsWithinTagBound(
  trx: Kysely<Database>,
  deps: UserGroupDeps,
  items: readonly CheckedItem[],
  at: Date,
  actor: Actor,
): Promise<Awaited<ReturnType<typeof insertPlainGroups>> | undefined> {
  await sql`savepoint upsert_run`.execute(trx);
  try {
    const inserted = await insertPlainGroups(trx, deps, items, at, actor);
    await sql`release savepoint upsert_run`.execute(trx);
    return inserted;
  } catch (err) {
    if (!(err instanceof AppError && err.code === 'tag_limit_reached')) throw err;
    await sql`rollback to savepoint upsert_run`.execute(trx);
    await sql`release savepoint upsert_run`.execute(trx);
    return undefined;
  }
}

/** Inserts plain new groups at once: per item, its row, token and history entry, or undefined when the identity was taken meanwhile. */
async function insertPlainGroups(
  trx: Kysely<Database>,
  deps: UserGroupDeps,
  items: readonly CheckedItem[],
  at: Date,
  actor: Actor,
): Promise<({ row: UserGroupRow; token: string; audit: AuditEntry } | undefined)[]> {
  const tokens = items.map(() => generateToken('user_group'));
  const rows = await insertUserGroupsIfAbsent(
    trx,
    items.map(({ key, item }, i) => newGroupRow(deps, key, storedFields(item), null, tokens[i], at)),
  );
  const byIdentity = new Map(rows.map((row) => [`${row.environment}/${row.provided_id}`, row]));
  const done = items.map(({ key }, i) => {
    const row = byIdentity.get(`${key.environment}/${key.providedId}`);
    if (!row) return undefined;
    const tags = tagsOf(row);
    const details: AuditDetails = tags.length > 0 ? { group_tags: { old: [], new: tags } } : {};
    return { row, token: tokens[i], audit: auditEntry(row, 'user_group.create', actor, at, undefined, details), tags };
  });
  await insertTagRowsOfNewGroups(
    trx,
    done.flatMap((d) =>
      d && d.tags.length > 0 ? [{ tenant: { accountId: d.row.account_id, environment: d.row.environment }, teamId: d.row.team_id, tags: d.tags }] : [],
    ),
    deps,
  );
  return done;
}

/** One item the general way, inside a savepoint: a rule it breaks rolls back only its own writes. */
async function upsertSaved(
  trx: Kysely<Database>,
  deps: UserGroupDeps,
  { key, item }: CheckedItem,
  actor: Actor,
  at: Date,
  audits: AuditEntry[],
): Promise<UpsertOutcome> {
  await sql`savepoint upsert_item`.execute(trx);
  try {
    const outcome = await upsertOne(trx, deps, key, item, actor, at);
    await sql`release savepoint upsert_item`.execute(trx);
    if (outcome.audit) audits.push(outcome.audit);
    return {
      user_group_id: key.providedId,
      api_environment_tag: key.environment,
      status: outcome.status,
      team_id: outcome.row.team_id,
      ...(outcome.token === undefined ? {} : { token: outcome.token }),
    };
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    await sql`rollback to savepoint upsert_item`.execute(trx);
    return { user_group_id: key.providedId, api_environment_tag: key.environment, status: 'failed', error: { code: err.code, message: err.message } };
  }
}

async function upsertOne(
  trx: Kysely<Database>,
  deps: UserGroupDeps,
  key: GroupIdentity,
  item: UserGroupInput,
  actor: Actor,
  at: Date,
): Promise<{ status: 'created' | 'updated' | 'unchanged'; row: UserGroupRow; token?: string; audit?: AuditEntry }> {
  if (!(await findUserGroupForUpdate(trx, deps.database.dialect, key))) {
    const token = generateToken('user_group');
    const inserted = await insertNewIn(trx, deps, key, item, token, at, actor);
    if (inserted) return { status: 'created', row: inserted.chain[0], token, audit: inserted.audit };
    // Another transaction created it since the read: change it as it now is.
  }
  const { row, audit } = await updateIn(trx, deps, key, { changes: storedFields(item), parent: parentChoice(item) }, actor, at);
  return { status: audit ? 'updated' : 'unchanged', row, audit };
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
