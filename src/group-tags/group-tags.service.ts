// The tag set of a tenant (docs/api.md, "Tags"): list it with counts, create a tag, rename or
// delete one on every group that carries it. The routes and `ugs tags` call these.
//
// A rename or a delete changes each group that carries the tag as a PUT would (a history
// entry and a user_group.updated event in the same transaction), in batches of
// UGS_TAG_BATCH_SIZE groups, each its own transaction under the tenant's lock (hierarchy.repository.ts: every
// write that sets a group's tags holds it too). So no batch overwrites a PUT, no transaction
// grows with the number of groups, and other writes go on between batches. The batches walk
// the carriers forward in team_id order; the last one also takes the tag off any group that a
// write gave it meanwhile behind the walk, and only then takes it out of the set, in the
// same transaction: a tag leaves the set only when no group carries it.
import type { DatabaseHandle } from '../db/database.ts';
import type { Database, UserGroupRow } from '../db/schema.ts';
import type { Kysely } from 'kysely';
import type { Tenant } from '../db/tenant.ts';
import type { HeavyOperationKind, HeavyOperations } from '../accounts/heavy-operations.ts';
import { inTransaction } from '../db/transaction.ts';
import { givingTurns } from '../db/between-statements.ts';
import { AppError, validationFailed } from '../foundations/errors.ts';
import { resolveEnvironment, type Principal } from '../auth/principal.ts';
import { appendAudits, type Actor } from '../audit/audit.repository.ts';
import { lockHierarchy } from '../user-groups/hierarchy/hierarchy.repository.ts';
import { addToTagSets, checkTagBound, tagInSet, tagNamed } from '../user-groups/tag-set.ts';
import { normalizeTag, normalizeTags } from '../user-groups/declared-fields.ts';
import { auditEntry } from '../user-groups/user-groups.service.ts';
import * as repository from './group-tags.repository.ts';
import type { CreateGroupTagInput, GroupTagKeyInput, ListGroupTagsInput, RenameGroupTagInput } from './group-tags.schemas.ts';

export interface GroupTagDeps {
  database: DatabaseHandle;
  now: () => Date;
  /** Groups per transaction of a rename or a delete (UGS_TAG_BATCH_SIZE). */
  batchSize: number;
  /** UGS_MAX_TAGS_PER_ENVIRONMENT (user-groups/tag-set.ts). */
  maxTagsPerEnvironment: number;
  /** The slots of each account's heavy operations: a rename or a delete runs in one. */
  heavyOperations: HeavyOperations;
}

function tenantOf(principal: Principal, environment: ListGroupTagsInput['api_environment_tag']): Tenant {
  return { accountId: principal.accountId, environment: resolveEnvironment(principal, environment) };
}

export async function listGroupTagsPage(
  deps: GroupTagDeps,
  principal: Principal,
  query: ListGroupTagsInput,
): Promise<{ tags: repository.GroupTagCount[]; nextCursor: string | null }> {
  const tenant = tenantOf(principal, query.api_environment_tag);
  const limit = query.limit ?? 100;
  const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor);
  const prefix = query.q === undefined ? undefined : normalizeTag(query.q);
  const rows = await repository.listGroupTags(deps.database.db, deps.database.dialect, tenant, { after, prefix, limit: limit + 1 });
  const page = rows.slice(0, limit);
  return { tags: page, nextCursor: rows.length > limit ? encodeCursor(page[page.length - 1].name) : null };
}

/**
 * A tag no group carries yet: in the set with 0 groups; `409 group_tag_exists` if it is there
 * already, `409 tag_limit_reached` if the set is full. Under the tenant's lock, as every write
 * that adds to the set, so that the bound holds across processes.
 */
export async function createGroupTag(deps: GroupTagDeps, principal: Principal, input: CreateGroupTagInput): Promise<repository.GroupTagCount> {
  const tenant = tenantOf(principal, input.api_environment_tag);
  const name = normalizeTag(input.name);
  // The set holds every tag a group carries (addToTagSets), so a tag not in it is on no group;
  // but for one an instance of a version before the set gave a group (docs/operations.md,
  // "Upgrades, migrations and rollback"), which this brings into the set: the count says so.
  const count = await inTransaction(deps.database, async (trx) => {
    await lockHierarchy(trx, deps.database.dialect, tenant);
    if (!(await repository.insertGroupTag(trx, tenant, name))) return undefined;
    await checkTagBound(trx, tenant, deps);
    return repository.countCarriers(trx, tenant, name);
  });
  if (count === undefined) throw new AppError('group_tag_exists', `the tag "${name}" already exists in ${tenant.environment}`);
  return { name, user_group_count: count };
}

export interface RetagOutcome {
  /** The tag afterwards: the new name and its count for a rename; for a delete, the name. */
  tag: repository.GroupTagCount;
  /** A rename onto a tag that existed: the two are one now. */
  merged: boolean;
  userGroupsChanged: number;
}

export async function renameGroupTag(deps: GroupTagDeps, principal: Principal, actor: Actor, input: RenameGroupTagInput): Promise<RetagOutcome> {
  return retag(deps, tenantOf(principal, input.api_environment_tag), actor, input.name, normalizeTag(input.new_name));
}

export async function deleteGroupTagEverywhere(
  deps: GroupTagDeps,
  principal: Principal,
  actor: Actor,
  input: GroupTagKeyInput & { name: string },
): Promise<RetagOutcome> {
  return retag(deps, tenantOf(principal, input.api_environment_tag), actor, input.name, undefined);
}

/** A rename or a delete runs as one of its account's heavy operations (docs/api.md, "Heavy operations"). */
function retag(deps: GroupTagDeps, tenant: Tenant, actor: Actor, written: string, newName: string | undefined): Promise<RetagOutcome> {
  const operation: HeavyOperationKind = newName === undefined ? 'tag_delete' : 'tag_rename';
  return deps.heavyOperations.run(tenant.accountId, operation, () => retagInBatches(deps, tenant, actor, written, newName));
}

/**
 * Replaces the tag `written` names (tag-set.ts, tagNamed) with `newName` (a rename) or with
 * nothing (a delete) on every group, then takes it out of the set.
 */
async function retagInBatches(deps: GroupTagDeps, tenant: Tenant, actor: Actor, written: string, newName: string | undefined): Promise<RetagOutcome> {
  const { batchSize } = deps;
  const at = deps.now();
  const step: RetagStep = { name: written, newName, actor, at: at.toISOString(), when: at };
  let merged = false;
  let changed = 0;
  let afterTeamId = 0;
  let started = performance.now();
  for (let first = true; ; first = false) {
    const outcome = await inTransaction(deps.database, async (transaction) => {
      // On SQLite, a turn of the event loop after each statement (db/between-statements.ts).
      const trx = givingTurns(transaction, deps.database.dialect);
      await lockHierarchy(trx, deps.database.dialect, tenant);
      if (first) {
        step.name = await tagNamed(trx, tenant, written);
        if (newName === step.name) throw validationFailed('new_name', 'same_as_current', 'new_name is the current name: give a different one to rename');
        if (!(await tagInSet(trx, tenant, step.name))) throw new AppError('group_tag_not_found', `no tag "${written}" in ${tenant.environment}`);
        if (newName !== undefined) merged = await tagInSet(trx, tenant, newName);
      }
      const { name } = step;
      // In every batch, not only the first: a delete of newName may have taken it out meanwhile.
      // The new name counts against the bound in the old one's place: the old one leaves the set at the end.
      if (newName !== undefined) await addToTagSets(trx, [{ tenant, tags: [newName] }], { maxTagsPerEnvironment: deps.maxTagsPerEnvironment, leaving: name });
      const batch = await repository.groupsCarrying(trx, tenant, name, afterTeamId, batchSize);
      let done = await retagGroups(trx, tenant, batch, step);
      if (batch.length === batchSize) return { done, last: batch[batch.length - 1].team_id };
      // The end of the walk: groups given the tag behind it meanwhile, then the set.
      let rest: UserGroupRow[];
      do {
        rest = await repository.groupsCarrying(trx, tenant, name, 0, batchSize);
        done += await retagGroups(trx, tenant, rest, step);
      } while (rest.length === batchSize);
      await repository.deleteGroupTag(trx, tenant, name);
      return { done, last: null, count: newName === undefined ? 0 : await repository.countCarriers(trx, tenant, newName) };
    });
    changed += outcome.done;
    if (outcome.last === null) return { tag: { name: newName ?? step.name, user_group_count: outcome.count ?? 0 }, merged, userGroupsChanged: changed };
    afterTeamId = outcome.last;
    await pauseBetweenBatches(deps.database.dialect, performance.now() - started);
    started = performance.now();
  }
}

/**
 * Lets other writes in between two batches. PostgreSQL queues the waiters of the lock in
 * order, so a write waiting for it goes next; this process's own writes wait for the one
 * SQLite connection, and get it on the next turn of the event loop. Another process waiting
 * for SQLite's write lock tries again after a backoff of up to 100 ms (db/sqlite-lock.ts):
 * there the rename also waits as long as its batch took (at most that), so that a rename of
 * very many groups leaves them about half the time instead of none.
 */
function pauseBetweenBatches(dialect: DatabaseHandle['dialect'], batchMs: number): Promise<void> {
  if (dialect === 'sqlite') return new Promise((resolve) => setTimeout(resolve, Math.min(100, Math.max(1, batchMs))));
  return new Promise((resolve) => setImmediate(resolve));
}

interface RetagStep {
  name: string;
  newName: string | undefined;
  actor: Actor;
  at: string;
  when: Date;
}

/**
 * One batch: each group's tags without `name` (and with `newName`), its tag rows, its history
 * entry and event; answers how many changed. Every group found by its tag row loses that row,
 * so the walk always moves on, even past a row its group's own tags no longer name.
 */
async function retagGroups(trx: Kysely<Database>, tenant: Tenant, groups: readonly UserGroupRow[], step: RetagStep): Promise<number> {
  if (groups.length === 0) return 0;
  const before = new Map(groups.map((group) => [group.team_id, JSON.parse(group.group_tags) as string[]]));
  const after = new Map<number, string[]>();
  for (const [teamId, tags] of before) {
    if (tags.includes(step.name))
      after.set(teamId, normalizeTags([...tags.filter((tag) => tag !== step.name), ...(step.newName === undefined ? [] : [step.newName])]));
  }
  const updated =
    after.size === 0 ? [] : await repository.setGroupTags(trx, tenant, new Map([...after].map(([teamId, tags]) => [teamId, JSON.stringify(tags)])), step.at);
  await repository.deleteTagRows(
    trx,
    tenant,
    step.name,
    groups.map((group) => group.team_id),
  );
  if (step.newName !== undefined) {
    await repository.insertTagRows(
      trx,
      tenant,
      step.newName,
      updated.map((row) => row.team_id).filter((teamId) => !before.get(teamId)!.includes(step.newName!)),
    );
  }
  await appendAudits(
    trx,
    updated.map((row) =>
      auditEntry(row, 'user_group.update', step.actor, step.when, ['group_tags'], {
        group_tags: { old: before.get(row.team_id), new: after.get(row.team_id) },
      }),
    ),
  );
  return updated.length;
}

function encodeCursor(name: string): string {
  return Buffer.from(JSON.stringify({ after: name })).toString('base64url');
}

function decodeCursor(cursor: string): string {
  try {
    const after = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')).after;
    if (typeof after === 'string' && after.length > 0) return after;
  } catch {
    // fall through to the error below
  }
  throw validationFailed('cursor', 'invalid', 'cursor is not one this service returned');
}
