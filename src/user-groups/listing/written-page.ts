// A page of the listing (docs/api.md, "GET /api/users: list") as the database writes it
// (user-groups.json-sql.ts): the walk's groups as one JSON text of objects, and what the answer needs besides (the cursor, whether
// a next page exists, the chains of the children). The children's resolved fields are
// written here, from their chains, over the markers the database left.
import type { RawBuilder } from 'kysely';
import { asSubquery, type RangeWalk } from '../../db/tenant.ts';
import { sql } from '../../db/kysely.ts';
import type { Dialect } from '../../db/database.ts';
import type { ChainRow, ResolvedGroup } from '../group-chain.ts';
import { groupObjectSql, MARKER, OBJECT_START, RESOLVED_FIELDS } from '../user-groups.json-sql.ts';
import { resolvedFieldJson } from '../user-groups.json.ts';

/** What a page's statement answers: one row, whatever the walk found. */
export interface WrittenRows {
  /** The objects of the walked groups, in team_id order, each after a SEPARATOR but the first; null when the walk found none. */
  objects: string | null;
  /** How many groups the walk found: one more than shown when a next page exists. */
  walked: number;
  /** The chain columns of the walked groups that have a parent, each a JSON array [team_id, provided_id, parent_team_id, mapping, properties], joined by commas; null when none has. */
  chains: string | null;
}

/**
 * Between two objects of a page as the database joins them: a control character, which no
 * JSON text the database writes holds raw (user-groups.json-sql.ts), so the object of a
 * walk's extra row can be cut off, and the others' commas put in, without parsing them.
 */
const SEPARATOR = '\u0002';
const SEPARATOR_CODE = sql.lit(SEPARATOR.charCodeAt(0));

/**
 * The statement that writes the page walked by `walk` (its rows of user_groups in team_id
 * order, one more than a page shows when there are): one row.
 *
 * Both backends concatenate in the order the walk delivers its rows: the aggregate reads the
 * walk's subquery, which is ordered by team_id and read in that order, as PostgREST's
 * json_agg reads its. An ORDER BY within the aggregate would sort every written object again,
 * for the order it already has, a cost docs/performance.md measures. The page tests
 * (test/user-groups.list.test.ts) hold the order.
 */
export function writtenRows(dialect: Dialect, walk: RangeWalk<unknown>): RawBuilder<WrittenRows> {
  const walked = asSubquery(walk);
  const object = groupObjectSql(dialect);
  const chainColumns = sql`g.team_id, g.provided_id, g.parent_team_id, g.mapping, g.properties`;
  if (dialect === 'sqlite') {
    return sql<WrittenRows>`select group_concat(${object}, char(${SEPARATOR_CODE})) as objects, count(*) as walked,
        group_concat(case when g.parent_team_id is not null then json_array(${chainColumns}) end) as chains
      from ${walked} g`;
  }
  return sql<WrittenRows>`select string_agg(${object}, chr(${SEPARATOR_CODE})) as objects, count(*)::int4 as walked,
      string_agg(case when g.parent_team_id is not null then json_build_array(${chainColumns})::text end, ',') as chains
    from ${walked} g`;
}

/** A page of objects (the ListResponse's user_groups, without brackets) and the cursor after it. */
export interface WrittenPage {
  objects: string;
  /** The last shown group's team_id, or undefined for an empty page. */
  lastTeamId: number | undefined;
  /** Whether a group follows the last one shown. */
  more: boolean;
}

/** A part of a page: what its statement answered, and how many groups it shows (the walk read one more, where there was one). */
export interface WrittenPart {
  rows: WrittenRows;
  shown: number;
}

/**
 * The page from its parts (one, or several read a turn apart), in order: the extra row of
 * the last part cut off, the objects joined by commas and, where they hold markers, the
 * children's resolved fields written in.
 */
export async function finishWrittenPage(parts: readonly WrittenPart[], resolve: ResolveChains): Promise<WrittenPage> {
  const texts = parts.flatMap((part) => {
    const shown = shownObjects(part);
    return shown === undefined ? [] : [shown];
  });
  if (texts.length === 0) return { objects: '', lastTeamId: undefined, more: false };
  const lastTeamId = teamIdOfLastObject(texts[texts.length - 1]);
  const more = Number(parts[parts.length - 1].rows.walked) > parts[parts.length - 1].shown;
  const objects = texts.join(SEPARATOR).replaceAll(SEPARATOR, ',');
  const chains = parts.flatMap(({ rows }) => (rows.chains === null ? [] : chainRowsOf(rows.chains)));
  return { objects: chains.length === 0 ? objects : await withResolvedFields(objects, chains, resolve), lastTeamId, more };
}

/** The team_id of a part's last shown group, where the next part walks on from; undefined when it found none. */
export function lastShownTeamId(part: WrittenPart): number | undefined {
  const shown = shownObjects(part);
  return shown === undefined ? undefined : teamIdOfLastObject(shown);
}

/** A part's objects without the walk's extra one. */
function shownObjects({ rows, shown }: WrittenPart): string | undefined {
  if (rows.objects === null || rows.objects.length === 0) return undefined;
  return Number(rows.walked) <= shown ? rows.objects : rows.objects.slice(0, rows.objects.lastIndexOf(SEPARATOR));
}

/** Every object starts with its team_id, the first field of the answer (asserted in user-groups.json-sql.ts): `{"team_id":123,`. */
function teamIdOfLastObject(text: string): number {
  const from = text.lastIndexOf(SEPARATOR) + 1 + OBJECT_START.length;
  return Number(text.slice(from, text.indexOf(',', from)));
}

function chainRowsOf(chains: string): ChainRow[] {
  const rows = JSON.parse(`[${chains}]`) as [number, string, number | null, string | null, string | null][];
  return rows.map(([team_id, provided_id, parent_team_id, mapping, properties]) => ({ team_id, provided_id, parent_team_id, mapping, properties }));
}

/** Resolves the page's groups from their chain rows, reading the ancestors above them (list.repository.ts, resolvePage). */
export type ResolveChains = (rows: ChainRow[]) => Promise<ResolvedGroup<ChainRow>[]>;

/** The objects with each marker replaced by its group's resolved field. */
async function withResolvedFields(objects: string, chains: ChainRow[], resolve: ResolveChains): Promise<string> {
  if (!objects.includes(MARKER)) return objects;
  const resolved = new Map<number, ResolvedGroup<ChainRow>>();
  for (const group of await resolve(chains)) resolved.set(Number(group.row.team_id), group);
  let written = '';
  let from = 0;
  for (let start = objects.indexOf(MARKER); start !== -1; start = objects.indexOf(MARKER, from)) {
    // A marker: the field's index (one digit) and the group's team_id, between two MARKERs.
    const end = objects.indexOf(MARKER, start + 1);
    const teamId = Number(objects.slice(start + 2, end));
    const group = resolved.get(teamId);
    if (!group) throw new Error(`a page's group ${teamId} is missing from its chains`);
    written += objects.slice(from, start) + resolvedFieldJson(RESOLVED_FIELDS[objects.charCodeAt(start + 1) - 48], group);
    from = end + 1;
  }
  return written + objects.slice(from);
}
