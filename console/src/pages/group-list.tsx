// The user groups of one environment, a page at a time (keyset pagination: the service's
// next_cursor, so a page costs the same at group 10 or group 1,000,000), with search and
// filters kept in the URL's fragment.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import type { EnvironmentTag, ListUserGroupsParams } from '../../../packages/client/src/index.ts';
import type { Session } from '../session.ts';
import { groupHref, navigate } from '../router.ts';
import { ErrorAlert, ScrollingTable, Status, formatTime, useLoad } from '../components/common.tsx';
import { isUserGroupServiceError } from '../../../packages/client/src/index.ts';

export const PAGE_SIZE = 25;
const countOf = (groups: number) => `${groups} user ${groups === 1 ? 'group' : 'groups'}`;

const FILTERS = [
  { name: 'q', label: 'Search', hint: 'start of id or name', api: 'q' },
  { name: 'tag', label: 'Tag', hint: 'a tag', api: 'tag' },
  { name: 'parent', label: 'Parent', hint: "a parent's id", api: 'parent_user_group_id' },
  { name: 'level', label: 'Level', hint: 'a level name', api: 'hierarchy_level' },
] as const;

/**
 * A cell of the list, named by its column: a phone shows each group as a card (console.css),
 * where a cell says what it is itself (its label, hidden in the table) and an empty one takes
 * no line.
 */
function Cell({ label, value }: { label: string; value: ComponentChildren }) {
  const empty = value === null || value === undefined || value === false || value === '';
  return (
    <td class={empty ? 'empty-cell' : undefined}>
      <span class="cell-label">{label}: </span>
      {empty ? '—' : value}
    </td>
  );
}

export function GroupList({ session, environment, params }: { session: Session; environment: EnvironmentTag; params: URLSearchParams }) {
  const filters = Object.fromEntries(FILTERS.map((filter) => [filter.name, params.get(filter.name) ?? ''])) as Record<(typeof FILTERS)[number]['name'], string>;
  const [draft, setDraft] = useState(filters);
  // The cursors of the pages before this one, to go back; the current page's cursor last.
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];
  const key = `${environment}|${params.toString()}`;
  const [shownKey, setShownKey] = useState(key);
  if (shownKey !== key) {
    // New filters or environment: back to the first page.
    setShownKey(key);
    setCursors([]);
    setDraft(filters);
  }

  const page = useLoad(() => {
    const query: ListUserGroupsParams = { api_environment_tag: environment, limit: PAGE_SIZE, cursor };
    for (const filter of FILTERS) if (filters[filter.name]) (query as Record<string, string>)[filter.api] = filters[filter.name];
    return session.client.listUserGroups(query);
  }, [key, cursor]);

  const fieldError = (api: string) =>
    isUserGroupServiceError(page.error, 'validation_failed') ? page.error.details.find((detail) => detail.field === api)?.issue : undefined;

  const search = (event: Event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const filter of FILTERS) if (draft[filter.name].trim()) next.set(filter.name, draft[filter.name].trim());
    navigate(`#/groups${next.size ? `?${next}` : ''}`);
  };

  return (
    <section aria-labelledby="groups-title">
      <div class="page-head">
        <h1 id="groups-title">User groups in {environment}</h1>
        {session.canWrite && (
          <a class="button" href="#/groups/new">
            New user group
          </a>
        )}
      </div>
      <form class="filters" role="search" aria-label="User groups" onSubmit={search}>
        {FILTERS.map((filter) => {
          const issue = fieldError(filter.api);
          return (
            <div class="field">
              <label for={`filter-${filter.name}`}>{filter.label}</label>
              <input
                id={`filter-${filter.name}`}
                type={filter.name === 'q' ? 'search' : 'text'}
                value={draft[filter.name]}
                placeholder={filter.hint}
                aria-invalid={issue ? true : undefined}
                aria-describedby={issue ? `filter-${filter.name}-error` : undefined}
                onInput={(event) => setDraft({ ...draft, [filter.name]: event.currentTarget.value })}
              />
              {issue && (
                <p class="field-error" id={`filter-${filter.name}-error`}>
                  {filter.label}: {issue.replace(/_/g, ' ')}
                </p>
              )}
            </div>
          );
        })}
        <div class="filter-actions">
          <button type="submit">Search</button>
          <a class="button secondary" href="#/groups">
            Clear
          </a>
        </div>
      </form>

      <Status message={params.get('deleted') ? `Deleted ${params.get('deleted')}.` : null} />
      {page.error && !fieldError('q') ? <ErrorAlert error={page.error} /> : null}
      <ScrollingTable label="User groups">
        <table class="groups">
          <caption>{page.loading ? 'Loading…' : `Page ${cursors.length + 1}: ${countOf(page.data?.user_groups.length ?? 0)}`}</caption>
          <thead>
            <tr>
              <th scope="col">user_group_id</th>
              <th scope="col">Name</th>
              <th scope="col">Level</th>
              <th scope="col">Parent</th>
              <th scope="col">Tags</th>
              <th scope="col">Updated</th>
            </tr>
          </thead>
          <tbody>
            {page.data?.user_groups.map((group) => (
              <tr>
                <td class="group-id">
                  <a href={groupHref(environment, group.provided_id)}>{group.provided_id}</a>
                </td>
                <td class="group-name">{group.name}</td>
                <Cell label="Level" value={group.hierarchy_level} />
                <Cell
                  label="Parent"
                  value={group.parent_user_group_id && <a href={groupHref(environment, group.parent_user_group_id)}>{group.parent_user_group_id}</a>}
                />
                <Cell label="Tags" value={group.group_tags.length > 0 && group.group_tags.join(', ')} />
                <Cell label="Updated" value={formatTime(group.updated_at)} />
              </tr>
            ))}
          </tbody>
        </table>
      </ScrollingTable>
      {page.data && page.data.user_groups.length === 0 && <p class="empty">No user groups match.</p>}
      <nav class="pager" aria-label="Pages of user groups">
        <button type="button" class="secondary" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
          Previous page
        </button>
        <button type="button" class="secondary" disabled={!page.data?.next_cursor} onClick={() => setCursors([...cursors, page.data!.next_cursor!])}>
          Next page
        </button>
      </nav>
    </section>
  );
}
