// A group as the API shows it: its own row, its parent's user_group_id, and its computed
// mapping and properties, its own values merged over its ancestors' (docs/api.md,
// "Hierarchy"). Computed at every read from the committed chain of rows, in one statement
// (user-groups.repository.ts), so a parent's change shows in its children at once, on every
// instance: nothing is cached or copied into the children.
import type { UserGroupRow } from '../db/schema.ts';
import { BoundedMap } from '../foundations/bounded-map.ts';

/**
 * The fields children inherit, each with the answer's field that holds it merged over the
 * ancestors' (docs/api.md, "Hierarchy"). The declaration of each (GROUP_FIELDS, declared-fields.ts)
 * says so, and tsc holds the two together: inheriting another field is code here first.
 */
export interface InheritedFields {
  mapping: 'computed_mapping';
  properties: 'computed_properties';
}

/** What merging needs of each row of a chain. */
export type ChainRow = Pick<UserGroupRow, 'team_id' | 'provided_id' | 'parent_team_id' | 'mapping' | 'properties'>;

export interface ResolvedGroup<R extends ChainRow = UserGroupRow> {
  row: R;
  /** The parent's user_group_id, or null for a root. */
  parentProvidedId: string | null;
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
  if (row.parent_team_id === null) return { row, parentProvidedId: null, computedMapping: row.mapping, computedProperties: row.properties };
  if (row.beyond_team_id !== null) return undefined;
  return {
    row,
    parentProvidedId: row.parent_provided_id,
    computedMapping: mergeNearestFirst([row.mapping, row.parent_mapping, row.grandparent_mapping]),
    computedProperties: mergeNearestFirst([row.properties, row.parent_properties, row.grandparent_properties]),
  };
}

/** A group from its chain: the group first, then its parent, grandparent and so on. */
export function resolveChain<R extends ChainRow>(chain: readonly R[]): ResolvedGroup<R> {
  const [row] = chain;
  if (chain.length === 1) {
    // A root: nothing to merge, and nothing parsed (the hot path of a flat account).
    return { row, parentProvidedId: null, computedMapping: row.mapping, computedProperties: row.properties };
  }
  return {
    row,
    parentProvidedId: chain[1].provided_id,
    computedMapping: mergeNearestFirst(chain.map((r) => r.mapping)),
    computedProperties: mergeNearestFirst(chain.map((r) => r.properties)),
  };
}

/** A computed field as text, and the object it parses to once something merges over it. */
interface Computed {
  text: string | null;
  object?: Record<string, unknown>;
}

/** `own` (stored JSON text) merged over `base`, key by key: base untouched when there is nothing of its own. */
function over(base: Computed, own: string | null): Computed {
  if (own === null) return base;
  if (base.text === null) return { text: own };
  base.object ??= JSON.parse(base.text) as Record<string, unknown>;
  // Spread defines each key as data (a key such as __proto__ stays data, never a setter).
  const object: Record<string, unknown> = { ...base.object, ...JSON.parse(own) };
  return { text: JSON.stringify(object), object };
}

/**
 * Resolves each of `rows` from the ancestors read for the page (team_id to row). Each
 * ancestor's computed values are merged once and shared by all its descendants on the page
 * (a page of one parent's children merges the parent's chain once). A chain stops where an
 * ancestor is missing, which only a concurrent delete of a whole subtree can cause between
 * the two reads; the rows are then about to vanish anyway.
 */
export function resolveEach<R extends ChainRow>(rows: readonly R[], ancestors: ReadonlyMap<number, ChainRow>): ResolvedGroup<R>[] {
  const computed = new Map<number, { mapping: Computed; properties: Computed }>();
  const computedOf = (row: ChainRow, depth: number): { mapping: Computed; properties: Computed } => {
    const known = computed.get(Number(row.team_id));
    if (known) return known;
    const parent = row.parent_team_id === null || depth > 16 ? undefined : ancestors.get(Number(row.parent_team_id));
    const base = parent ? computedOf(parent, depth + 1) : { mapping: { text: null }, properties: { text: null } };
    const own = { mapping: over(base.mapping, row.mapping), properties: over(base.properties, row.properties) };
    computed.set(Number(row.team_id), own);
    return own;
  };
  return rows.map((row) => {
    const { mapping, properties } = computedOf(row, 0);
    const parent = row.parent_team_id === null ? undefined : ancestors.get(Number(row.parent_team_id));
    return { row, parentProvidedId: parent?.provided_id ?? null, computedMapping: mapping.text, computedProperties: properties.text };
  });
}

/**
 * Merges remembered by their inputs: the stored texts of a chain decide its computed text, so
 * an entry can never be stale (a changed parent is another key). Page views ask for the same
 * groups over and over, and the merge (a parse per level and a stringify per level) is the
 * largest cost a child adds to the embed context. Bounded twice: in entries, and by leaving
 * out chains whose texts are long (the memory that bounds: docs/performance.md, "Why the code
 * is the way it is").
 */
const MERGED = new BoundedMap<string, string | null>(10_000);
const MERGED_KEY_MAX_LENGTH = 2048;

/** Top-level keys of JSON objects (as text), nearest first: the nearest value of a key wins. Null when all are null. */
function mergeNearestFirst(texts: readonly (string | null)[]): string | null {
  let present = 0;
  for (const text of texts) if (text !== null) present++;
  if (present <= 1) return texts.find((text) => text !== null) ?? null;
  // U+0000 never occurs in stored JSON text (JSON escapes control characters): a safe separator.
  const key = texts.join('\u0000');
  const remembered = key.length <= MERGED_KEY_MAX_LENGTH ? MERGED.get(key) : undefined;
  if (remembered !== undefined) return remembered;
  let merged: Computed = { text: null };
  for (let i = texts.length - 1; i >= 0; i--) merged = over(merged, texts[i]);
  if (key.length <= MERGED_KEY_MAX_LENGTH) MERGED.set(key, merged.text);
  return merged.text;
}
