// A group as the API shows it: its own row, its parent's user_group_id, and its computed
// mapping and properties, its own values merged over its ancestors' (docs/api.md,
// "Hierarchy"). Computed at every read from the committed chain of rows, in one statement
// (user-groups.repository.ts), so a parent's change shows in its children at once, on every
// instance: nothing is cached or copied into the children.
import type { UserGroupRow } from '../db/schema.ts';

/** What merging needs of each row of a chain. */
export type ChainRow = Pick<UserGroupRow, 'team_id' | 'provided_id' | 'parent_team_id' | 'mapping' | 'properties'>;

export interface ResolvedGroup<R extends ChainRow = UserGroupRow> {
  row: R;
  /** The parent's user_group_id, or null for a root. */
  parentId: string | null;
  /** JSON text, as stored: the group's own values over its ancestors', nearest winning. */
  computedMapping: string | null;
  computedProperties: string | null;
}

/** What a hot read joins to a group's row from its parent and grandparent (user-groups.repository.ts, withAncestry). */
export interface Ancestry {
  parent_provided_id: string | null;
  parent_mapping: string | null;
  parent_properties: string | null;
  grandparent_mapping: string | null;
  grandparent_properties: string | null;
  /** The grandparent's parent: set only in a hierarchy deeper than three levels. */
  beyond_team_id: number | null;
}

/** A group from its row and its ancestry; undefined when the hierarchy goes deeper than the ancestry reaches (read the chain). */
export function resolveAncestry<R extends ChainRow>(row: R & Ancestry): ResolvedGroup<R> | undefined {
  if (row.parent_team_id === null) return { row, parentId: null, computedMapping: row.mapping, computedProperties: row.properties };
  if (row.beyond_team_id !== null) return undefined;
  return {
    row,
    parentId: row.parent_provided_id,
    computedMapping: mergeNearestFirst([row.mapping, row.parent_mapping, row.grandparent_mapping]),
    computedProperties: mergeNearestFirst([row.properties, row.parent_properties, row.grandparent_properties]),
  };
}

/** A group from its chain: the group first, then its parent, grandparent and so on. */
export function resolveChain<R extends ChainRow>(chain: readonly R[]): ResolvedGroup<R> {
  const [row] = chain;
  if (chain.length === 1) {
    // A root: nothing to merge, and nothing parsed (the hot path of a flat account).
    return { row, parentId: null, computedMapping: row.mapping, computedProperties: row.properties };
  }
  return {
    row,
    parentId: chain[1].provided_id,
    computedMapping: mergeNearestFirst(chain.map((r) => r.mapping)),
    computedProperties: mergeNearestFirst(chain.map((r) => r.properties)),
  };
}

/**
 * Resolves each of `rows` from the ancestors read for the page (team_id to row). A chain
 * stops where an ancestor is missing, which only a concurrent delete of a whole subtree can
 * cause between the two reads; the rows are then about to vanish anyway.
 */
export function resolveEach<R extends ChainRow>(rows: readonly R[], ancestors: ReadonlyMap<number, R>): ResolvedGroup<R>[] {
  return rows.map((row) => {
    const chain = [row];
    for (let next = row.parent_team_id; next !== null; ) {
      const ancestor = ancestors.get(Number(next));
      if (!ancestor || chain.length > 10) break;
      chain.push(ancestor);
      next = ancestor.parent_team_id;
    }
    return resolveChain(chain);
  });
}

/** Top-level keys of JSON objects (as text), nearest first: the nearest value of a key wins. Null when all are null. */
function mergeNearestFirst(texts: readonly (string | null)[]): string | null {
  const present = texts.filter((text): text is string => text !== null);
  if (present.length <= 1) return present[0] ?? null;
  // No prototype: a key such as __proto__ is data here, never a setter.
  const merged: Record<string, unknown> = Object.create(null);
  for (let i = present.length - 1; i >= 0; i--) Object.assign(merged, JSON.parse(present[i]));
  return JSON.stringify(merged);
}
