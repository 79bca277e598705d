// One part of a bulk upsert (upsert.service.ts), in the caller's transaction: its items in
// order, under every lock they may need, taken before the first (upsert-locks.ts).
//
// Most items of a bulk call are plain: a new group without parent or level, or fields of an
// existing group that leave its place in the hierarchy and its tags as they are. Such an item
// can break no rule once its fields are valid, so a run of them is written at once: the new
// groups in one multi-row insert, the changes in one multi-row update per set of fields
// (user-groups.repository.ts), each with the history entry a single create or PUT writes.
// Any other item (a parent, a level, new tags) takes the steps of a single create or PUT
// (insertNewIn, updateIn in user-groups.service.ts) inside a savepoint, so that a rule it
// breaks rolls back only its own writes and it gets the error a single call would.
import type { Kysely } from 'kysely';
import type { Database, Environment, UserGroupRow } from '../db/schema.ts';
import { sql } from '../db/kysely.ts';
import { AppError } from '../foundations/errors.ts';
import type { UserGroupInput } from './user-groups.schemas.ts';
import { appendAudits, type Actor, type AuditDetails, type AuditEntry } from '../audit/audit.repository.ts';
import { generateToken } from '../auth/token-format.ts';
import {
  findUserGroupForUpdate,
  findUserGroupsForUpdate,
  insertUserGroupsIfAbsent,
  updateUserGroupsFields,
  type GroupIdentity,
} from './user-groups.repository.ts';
import { insertTagRowsOfNewGroups } from './hierarchy/hierarchy.repository.ts';
import { storedFields } from './stored-fields.ts';
import { lockUpsertTargets, type UpsertTarget } from './upsert-locks.ts';
import { auditEntry, changedFields, insertNewIn, newGroupRow, parentChoice, tagsOf, updateIn, type UserGroupDeps } from './user-groups.service.ts';

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

/** An item checked on its own before any transaction: its identity and fields, or its failure. */
export type CheckedItem = { key: GroupIdentity; item: UserGroupInput };
export type CheckResult = CheckedItem | { error: true; failed: UpsertOutcome };

/** What a plain item of a run writes: a new group, or an existing group's fields. */
type RunEntry =
  | { position: number; checked: CheckedItem; create: true }
  | { position: number; checked: CheckedItem; create: false; current: UserGroupRow; changes: ReturnType<typeof storedFields>; changed: string[] };

/** Does the part's items in order; answers one outcome per item, in the same order. */
export async function upsertChunk(trx: Kysely<Database>, deps: UserGroupDeps, part: readonly CheckResult[], actor: Actor, at: Date): Promise<UpsertOutcome[]> {
  const items = part.filter((entry): entry is CheckedItem => !('error' in entry));
  await lockUpsertTargets(trx, deps.database.dialect, items.map(upsertTarget));
  const groups = await currentGroups(trx, deps, items);
  const outcomes: UpsertOutcome[] = new Array(part.length);
  const audits: AuditEntry[] = [];
  let run: RunEntry[] = [];
  const inRun = new Set<string>();

  const flush = async () => {
    if (run.length === 0) return;
    const creates = run.filter((entry) => entry.create);
    // undefined: their new tags would pass the environment's bound (tag-set.ts); then each goes
    // on its own below, so that only the items that add a tag past it fail (tag_limit_reached).
    const inserted = await insertPlainGroupsWithinTagBound(
      trx,
      deps,
      creates.map((entry) => entry.checked),
      at,
      actor,
    );
    const updated = await updatePlainGroups(trx, run, at);
    let nextCreate = 0;
    for (const entry of run) {
      const { key } = entry.checked;
      if (entry.create) {
        const done = inserted?.[nextCreate++];
        if (done) {
          audits.push(done.audit);
          groups.set(identityOf(key), done.row);
          outcomes[entry.position] = created(key, done.row, done.token);
          continue;
        }
        // Another transaction created it meanwhile (a single create, PostgreSQL): change it as it
        // now is; or the run's tags passed the bound: this item on its own.
      } else {
        const row = updated.get(entry.current.team_id);
        if (row) {
          audits.push(auditEntry(row, 'user_group.update', actor, at, entry.changed));
          groups.set(identityOf(key), row);
          outcomes[entry.position] = { user_group_id: key.providedId, api_environment_tag: key.environment, status: 'updated', team_id: row.team_id };
          continue;
        }
      }
      outcomes[entry.position] = await upsertSaved(trx, deps, entry.checked, actor, at, audits, groups);
    }
    run = [];
    inRun.clear();
  };

  for (const [position, entry] of part.entries()) {
    if ('error' in entry) {
      outcomes[position] = entry.failed;
      continue;
    }
    const identity = identityOf(entry.key);
    // An item that names a group an earlier item of the run writes sees that write first.
    if (inRun.has(identity)) await flush();
    const current = groups.get(identity);
    const { item } = entry;
    const keepsPlace = item.parent_user_group_id === undefined && item.hierarchy_level === undefined;
    if (!current && (item.parent_user_group_id ?? null) === null && (item.hierarchy_level ?? null) === null) {
      run.push({ position, checked: entry, create: true });
      inRun.add(identity);
      continue;
    }
    if (current && keepsPlace) {
      const changes = storedFields(item);
      if (changes.group_tags === undefined || changes.group_tags === current.group_tags) {
        const changed = changedFields(changes, current);
        if (changed.length === 0) {
          outcomes[position] = {
            user_group_id: entry.key.providedId,
            api_environment_tag: entry.key.environment,
            status: 'unchanged',
            team_id: current.team_id,
          };
        } else {
          run.push({ position, checked: entry, create: false, current, changes, changed });
          inRun.add(identity);
        }
        continue;
      }
    }
    await flush();
    outcomes[position] = await upsertSaved(trx, deps, entry, actor, at, audits, groups);
  }
  await flush();
  await appendAudits(trx, audits);
  return outcomes;
}

const identityOf = (key: GroupIdentity) => `${key.environment}/${key.providedId}`;

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

/** The groups the items name that exist, by identity, each held until the transaction ends. */
async function currentGroups(trx: Kysely<Database>, deps: UserGroupDeps, items: readonly CheckedItem[]): Promise<Map<string, UserGroupRow>> {
  const groups = new Map<string, UserGroupRow>();
  for (const environment of ['Customer', 'Testing'] as const) {
    const ofEnvironment = items.filter((entry) => entry.key.environment === environment);
    if (ofEnvironment.length === 0) continue;
    const tenant = { accountId: ofEnvironment[0].key.accountId, environment };
    const found = await findUserGroupsForUpdate(trx, deps.database.dialect, tenant, [...new Set(ofEnvironment.map((entry) => entry.key.providedId))]);
    for (const [providedId, row] of found) groups.set(identityOf({ ...tenant, providedId }), row);
  }
  return groups;
}

function created(key: GroupIdentity, row: UserGroupRow, token?: string): UpsertOutcome {
  return { user_group_id: key.providedId, api_environment_tag: key.environment, status: 'created', team_id: row.team_id, ...(token ? { token } : {}) };
}

/** insertPlainGroups in a savepoint; undefined, and nothing written, when the groups' new tags would pass their environment's bound (tag-set.ts). */
async function insertPlainGroupsWithinTagBound(
  trx: Kysely<Database>,
  deps: UserGroupDeps,
  items: readonly CheckedItem[],
  at: Date,
  actor: Actor,
): Promise<Awaited<ReturnType<typeof insertPlainGroups>> | undefined> {
  if (items.length === 0) return [];
  // Without tags the bound cannot be passed: nothing to roll back to.
  if (!items.some(({ item }) => (item.group_tags?.length ?? 0) > 0)) return insertPlainGroups(trx, deps, items, at, actor);
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
  if (items.length === 0) return [];
  const tokens = items.map(() => generateToken('user_group'));
  const rows = await insertUserGroupsIfAbsent(
    trx,
    items.map(({ key, item }, i) => newGroupRow(deps, key, storedFields(item), null, tokens[i], at)),
  );
  const byIdentity = new Map(rows.map((row) => [`${row.environment}/${row.provided_id}`, row]));
  const done = items.map(({ key }, i) => {
    const row = byIdentity.get(identityOf(key));
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

/** Writes the run's changes to existing groups, per tenant; the rows as updated, by team_id. */
async function updatePlainGroups(trx: Kysely<Database>, run: readonly RunEntry[], at: Date): Promise<Map<number, UserGroupRow>> {
  const updated = new Map<number, UserGroupRow>();
  for (const environment of ['Customer', 'Testing'] as const) {
    const updates = run.flatMap((entry) =>
      !entry.create && entry.checked.key.environment === environment ? [{ teamId: entry.current.team_id, fields: entry.changes }] : [],
    );
    if (updates.length === 0) continue;
    const tenant = { accountId: run[0].checked.key.accountId, environment };
    for (const [teamId, row] of await updateUserGroupsFields(trx, tenant, updates, at.toISOString())) updated.set(teamId, row);
  }
  return updated;
}

/** One item the general way, inside a savepoint: a rule it breaks rolls back only its own writes. */
async function upsertSaved(
  trx: Kysely<Database>,
  deps: UserGroupDeps,
  { key, item }: CheckedItem,
  actor: Actor,
  at: Date,
  audits: AuditEntry[],
  groups: Map<string, UserGroupRow>,
): Promise<UpsertOutcome> {
  await sql`savepoint upsert_item`.execute(trx);
  try {
    const outcome = await upsertOne(trx, deps, key, item, actor, at);
    await sql`release savepoint upsert_item`.execute(trx);
    if (outcome.audit) audits.push(outcome.audit);
    groups.set(identityOf(key), outcome.row);
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
