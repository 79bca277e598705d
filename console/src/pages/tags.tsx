// The environment's tags (docs/api.md, "Tags"): each with how many groups carry it (a link to
// those groups), a page at a time by the service's next_cursor; with the write scope, create a
// tag, rename one on every group (onto an existing tag: they merge) and delete one.
import { useState } from 'preact/hooks';
import { isUserGroupServiceError, requestFields, type EnvironmentTag, type GroupTag } from '../../../packages/client/src/index.ts';
import type { Session } from '../session.ts';
import { ConfirmDialog, Dialog, ErrorAlert, Status, lengthProblem, useLoad } from '../components/common.tsx';

export const TAGS_PAGE_SIZE = 50;
/** A tag's longest name, from the OpenAPI document. */
const NAME_MAX = requestFields.CreateGroupTagRequest.name.maxLength;
const groupsWith = (name: string) => `#/groups?tag=${encodeURIComponent(name)}`;
const plural = (count: number) => `${count} ${count === 1 ? 'group' : 'groups'}`;

export function TagsPage({ session, environment }: { session: Session; environment: EnvironmentTag }) {
  const [prefix, setPrefix] = useState('');
  const [draft, setDraft] = useState('');
  // The cursors of the pages before this one, to go back; the current page's cursor last.
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors[cursors.length - 1];
  const key = `${environment}|${prefix}`;
  const [shownKey, setShownKey] = useState(key);
  if (shownKey !== key) {
    setShownKey(key);
    setCursors([]);
  }
  const [status, setStatus] = useState<string | null>(null);
  const [renaming, setRenaming] = useState<GroupTag | null>(null);
  const [deleting, setDeleting] = useState<GroupTag | null>(null);
  const page = useLoad(
    () => session.client.listGroupTags({ api_environment_tag: environment, limit: TAGS_PAGE_SIZE, cursor, q: prefix || undefined }),
    [key, cursor],
  );
  const done = (message: string) => {
    setStatus(message);
    page.reload();
  };

  return (
    <section aria-labelledby="tags-title">
      <h1 id="tags-title">Tags in {environment}</h1>
      <p class="muted">Every tag the groups of {environment} carry, and those created for later, with how many groups carry each.</p>
      {session.canWrite && <CreateTag session={session} environment={environment} onCreated={(name) => done(`Created tag ${name}.`)} />}
      <form
        class="tag-search"
        role="search"
        aria-label="Tags by prefix"
        onSubmit={(event) => {
          event.preventDefault();
          setPrefix(draft.trim());
        }}
      >
        <div class="field">
          <label for="tag-prefix">Starts with</label>
          <LengthCheckedInput id="tag-prefix" type="search" value={draft} onInput={setDraft} />
        </div>
        <button type="submit" disabled={lengthProblem(draft, NAME_MAX) !== undefined}>
          Search
        </button>
      </form>
      <Status message={status} />
      <ErrorAlert error={page.error} />
      <table class="tags">
        <caption>
          {page.loading
            ? 'Loading…'
            : `Page ${cursors.length + 1}: ${page.data?.group_tags.length ?? 0} tags, sorted by name (capital letters before small ones)`}
        </caption>
        <thead>
          <tr>
            <th scope="col">Tag</th>
            <th scope="col">Groups</th>
            {session.canWrite && (
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>
          {page.data?.group_tags.map((tag) => (
            <tr>
              <td>
                <code>{tag.name}</code>
              </td>
              <td>
                {tag.user_group_count === 0 ? (
                  <span class="muted">0</span>
                ) : (
                  <a href={groupsWith(tag.name)} aria-label={`${plural(tag.user_group_count)} with tag ${tag.name}`}>
                    {tag.user_group_count}
                  </a>
                )}
              </td>
              {session.canWrite && (
                <td class="actions">
                  <button type="button" class="secondary small" onClick={() => setRenaming(tag)} aria-label={`Rename tag ${tag.name}`}>
                    Rename
                  </button>
                  <button type="button" class="danger small" onClick={() => setDeleting(tag)} aria-label={`Delete tag ${tag.name}`}>
                    Delete
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {page.data?.group_tags.length === 0 && <p class="empty">No tags{prefix ? ` start with ${prefix}` : ''}.</p>}
      <nav class="pager" aria-label="Pages of tags">
        <button type="button" class="secondary" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
          Previous page
        </button>
        <button type="button" class="secondary" disabled={!page.data?.next_cursor} onClick={() => setCursors([...cursors, page.data!.next_cursor!])}>
          Next page
        </button>
      </nav>

      <RenameDialog
        session={session}
        environment={environment}
        tag={renaming}
        onClose={() => setRenaming(null)}
        onRenamed={(message) => {
          setRenaming(null);
          done(message);
        }}
      />
      <ConfirmDialog
        title="Delete the tag"
        open={deleting !== null}
        onClose={() => setDeleting(null)}
        confirmLabel={`Delete tag ${deleting?.name ?? ''}`}
        confirm={async () => {
          const { name, user_groups_changed } = await session.client.deleteGroupTag({ name: deleting!.name, api_environment_tag: environment });
          setDeleting(null);
          done(`Deleted tag ${name} from ${plural(user_groups_changed)}.`);
        }}
      >
        <p>
          <code>{deleting?.name}</code> is removed from {plural(deleting?.user_group_count ?? 0)} (each gets a history entry) and from this list.
        </p>
      </ConfirmDialog>
    </section>
  );
}

function CreateTag({ session, environment, onCreated }: { session: Session; environment: EnvironmentTag; onCreated: (name: string) => void }) {
  const [name, setName] = useState('');
  const [error, setError] = useState<unknown>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      const { group_tag } = await session.client.createGroupTag({ name, api_environment_tag: environment });
      setName('');
      onCreated(group_tag.name);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="create-tag" onSubmit={submit} aria-labelledby="create-tag-title">
      <h2 id="create-tag-title">Create a tag</h2>
      <div class="row">
        <div class="field">
          <label for="new-tag">Name</label>
          <LengthCheckedInput id="new-tag" value={name} onInput={setName} />
        </div>
        <button type="submit" disabled={name === '' || lengthProblem(name, NAME_MAX) !== undefined}>
          Create tag
        </button>
      </div>
      <p class="hint">A tag no group carries yet: it is offered when a group is edited.</p>
      <ErrorAlert error={error} />
    </form>
  );
}

function RenameDialog(props: {
  session: Session;
  environment: EnvironmentTag;
  tag: GroupTag | null;
  onClose: () => void;
  onRenamed: (message: string) => void;
}) {
  const [newName, setNewName] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const close = () => {
    setNewName('');
    setError(null);
    props.onClose();
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const renamed = await props.session.client.renameGroupTag({ name: props.tag!.name, new_name: newName, api_environment_tag: props.environment });
      setNewName('');
      props.onRenamed(
        `Renamed tag ${props.tag!.name} to ${renamed.group_tag.name} on ${plural(renamed.user_groups_changed)}` +
          (renamed.merged ? `: merged into the existing tag, which ${plural(renamed.group_tag.user_group_count)} carry now.` : '.'),
      );
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const fieldError = isUserGroupServiceError(error, 'validation_failed') ? error.message : undefined;
  return (
    <Dialog title="Rename the tag" open={props.tag !== null} onClose={close}>
      <form onSubmit={submit}>
        <p>
          Every group with <code>{props.tag?.name}</code> ({plural(props.tag?.user_group_count ?? 0)}) gets the new name instead. A name that is a tag already
          merges the two.
        </p>
        <div class="field">
          <label for="rename-tag">New name</label>
          <LengthCheckedInput id="rename-tag" value={newName} onInput={setNewName} serviceError={fieldError} />
        </div>
        {!fieldError && <ErrorAlert error={error} />}
        <button type="submit" disabled={busy || newName === '' || lengthProblem(newName, NAME_MAX) !== undefined}>
          Rename
        </button>
      </form>
    </Dialog>
  );
}

/**
 * A tag name's input: longer than a tag may be, it says so next to it instead of cutting
 * what was typed or pasted (lengthProblem); the service's own refusal is shown the same way.
 */
function LengthCheckedInput(props: { id: string; value: string; onInput: (value: string) => void; type?: string; serviceError?: string }) {
  const problem = lengthProblem(props.value, NAME_MAX) ?? props.serviceError;
  const errorId = `${props.id}-error`;
  return (
    <>
      <input
        id={props.id}
        type={props.type}
        value={props.value}
        autoComplete="off"
        aria-invalid={problem ? true : undefined}
        aria-describedby={problem ? errorId : undefined}
        onInput={(event) => props.onInput(event.currentTarget.value)}
      />
      {problem && (
        <p class="field-error" id={errorId}>
          {problem}
        </p>
      )}
    </>
  );
}
