// One user group: its fields (own and computed; a field this page has no row of its own for
// gets a plain one, from the OpenAPI document), parent and children, the variables a
// dashboard gets (embed-preview.tsx: from a real embed token, when asked), its history
// as a timeline, and, for a write token, edit, rotate and delete.
import { useState } from 'preact/hooks';
import type { EnvironmentTag, UserGroupWithoutToken } from '../../../packages/client/src/index.ts';
import type { Session } from '../session.ts';
import { groupHref, navigate } from '../router.ts';
import { changeInWords, fieldInWords, findGroup, pretty, valueInWords } from '../groups.ts';
import { Dialog, ErrorAlert, ShownOnce, Status, Timeline, actedBy, formatTime, useLoad } from '../components/common.tsx';
import { isUserGroupServiceError, requestFields, userGroupFields } from '../../../packages/client/src/index.ts';
import { EmbedPreview } from './embed-preview.tsx';

/** The longest grace period the service takes (docs/api.md, "POST /api/user: rotate"). */
const GRACE = requestFields.CreateOrRotateRequest.grace_period_seconds;

/** The fields this page shows in a way of its own; every other field of a group (from the OpenAPI document) gets a row of its own. */
const OWN_ROWS = new Set<string>([
  'team_id',
  'name',
  'provided_id',
  'parent_user_group_id',
  'hierarchy_level',
  'group_tags',
  'mapping',
  'properties',
  'computed_mapping',
  'computed_properties',
  'api_environment_tag',
  'is_demo_group',
  'created_at',
  'updated_at',
]);
const OTHER_FIELDS = Object.keys(userGroupFields).filter((field) => !OWN_ROWS.has(field));

/** A value as a row shows it: none for null, yes or no, a list, JSON for an object. */
function shown(value: unknown): string {
  if (value === null || value === undefined) return 'none';
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (Array.isArray(value)) return value.length ? value.map((item) => (typeof item === 'string' ? item : JSON.stringify(item))).join(', ') : 'none';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

interface Props {
  session: Session;
  environment: EnvironmentTag;
  id: string;
  /** Arrived here from the edit form's Save (`?saved`): say so. */
  saved?: boolean;
}

export function GroupDetail({ session, environment, id, saved = false }: Props) {
  const group = useLoad(() => findGroup(session.client, environment, id), [environment, id]);
  if (group.loading && !group.data) return <p role="status">Loading…</p>;
  if (group.error) return <ErrorAlert error={group.error} />;
  if (!group.data) {
    return (
      <section>
        <h1>
          No user group “{id}” in {environment}
        </h1>
        <p>
          <a href="#/groups">Back to the list</a>
        </p>
      </section>
    );
  }
  return (
    <>
      <Status message={saved ? `Saved ${id}.` : null} />
      <GroupView session={session} environment={environment} group={group.data} reload={group.reload} />
    </>
  );
}

function GroupView({
  session,
  environment,
  group,
  reload,
}: {
  session: Session;
  environment: EnvironmentTag;
  group: UserGroupWithoutToken;
  reload: () => void;
}) {
  const id = group.provided_id;
  const children = useLoad(
    () => session.client.listUserGroups({ api_environment_tag: environment, parent_user_group_id: id, limit: 25 }),
    [environment, id, group.updated_at],
  );
  const history = useLoad(
    () => session.client.userGroupHistory({ user_group_id: id, api_environment_tag: environment, limit: 50 }),
    [environment, id, group.updated_at],
  );
  const [dialog, setDialog] = useState<'rotate' | 'delete' | null>(null);

  return (
    <article aria-labelledby="group-title">
      <p class="breadcrumb">
        <a href="#/groups">User groups</a> / {environment}
      </p>
      <div class="page-head">
        <h1 id="group-title" data-field="name">
          {group.name}
        </h1>
        {session.canWrite && (
          <div class="actions">
            <a class="button" href={groupHref(environment, id, true)}>
              Edit
            </a>
            <button type="button" onClick={() => setDialog('rotate')}>
              Rotate token
            </button>
            <button type="button" class="danger" onClick={() => setDialog('delete')}>
              Delete
            </button>
          </div>
        )}
      </div>

      <section aria-labelledby="fields-title">
        <h2 id="fields-title">Fields</h2>
        <dl class="fields">
          <dt>user_group_id</dt>
          <dd data-field="provided_id">
            <code>{id}</code>
          </dd>
          <dt>Environment</dt>
          <dd data-field="api_environment_tag">{group.api_environment_tag}</dd>
          <dt>Demo group</dt>
          <dd data-field="is_demo_group">{group.is_demo_group ? 'yes' : 'no'}</dd>
          <dt>Parent</dt>
          <dd data-field="parent_user_group_id">
            {group.parent_user_group_id ? <a href={groupHref(environment, group.parent_user_group_id)}>{group.parent_user_group_id}</a> : 'none'}
          </dd>
          <dt>Level</dt>
          <dd data-field="hierarchy_level">{group.hierarchy_level ?? 'none'}</dd>
          <dt>Tags</dt>
          <dd data-field="group_tags">{group.group_tags.length ? group.group_tags.join(', ') : 'none'}</dd>
          {OTHER_FIELDS.map((field) => (
            <>
              <dt>{field}</dt>
              <dd data-field={field}>{shown((group as unknown as Record<string, unknown>)[field])}</dd>
            </>
          ))}
          <dt>team_id</dt>
          <dd data-field="team_id">{group.team_id}</dd>
          <dt>Created</dt>
          <dd data-field="created_at">{formatTime(group.created_at)}</dd>
          <dt>Updated</dt>
          <dd data-field="updated_at">{formatTime(group.updated_at)}</dd>
        </dl>
        <div class="json-columns">
          <JsonBlock field="properties" title="Properties (own)" value={group.properties} />
          <JsonBlock field="computed_properties" title="Computed properties (with the groups above it)" value={group.computed_properties} />
          <JsonBlock field="mapping" title="Mapping (own)" value={group.mapping} />
          <JsonBlock field="computed_mapping" title="Computed mapping (with the groups above it)" value={group.computed_mapping} />
        </div>
      </section>

      <section aria-labelledby="children-title">
        <h2 id="children-title">Children</h2>
        {children.error ? <ErrorAlert error={children.error} /> : null}
        {children.data && children.data.user_groups.length === 0 && <p class="empty">No children.</p>}
        <ul class="children">
          {children.data?.user_groups.map((child) => (
            <li>
              <a href={groupHref(environment, child.provided_id)}>{child.provided_id}</a>{' '}
              {child.name !== child.provided_id && <span class="muted">{child.name}</span>}
            </li>
          ))}
        </ul>
        {children.data?.next_cursor && (
          <p>
            <a href={`#/groups?parent=${encodeURIComponent(id)}`}>All children</a>
          </p>
        )}
      </section>

      <EmbedPreview session={session} environment={environment} id={id} version={group.updated_at} />

      <section aria-labelledby="history-title">
        <h2 id="history-title">History</h2>
        {history.error ? <ErrorAlert error={history.error} /> : null}
        <Timeline entries={history.data?.entries}>
          {(entry) => (
            <>
              <p>
                <strong>{changeInWords(entry.action, entry.changed_fields)}</strong> {actedBy(entry)}
              </p>
              {entry.details &&
                Object.entries(entry.details).map(([field, change]) => (
                  <p class="change">
                    {fieldInWords(field)}: {valueInWords(change.old)} → {valueInWords(change.new)}
                  </p>
                ))}
            </>
          )}
        </Timeline>
      </section>

      <RotateDialog open={dialog === 'rotate'} onClose={() => setDialog(null)} session={session} environment={environment} id={id} onRotated={reload} />
      <DeleteDialog
        open={dialog === 'delete'}
        onClose={() => setDialog(null)}
        session={session}
        environment={environment}
        id={id}
        hasChildren={(children.data?.user_groups.length ?? 0) > 0}
      />
    </article>
  );
}

function JsonBlock({ field, title, value }: { field: string; title: string; value: unknown }) {
  return (
    <figure class="json-block" data-field={field}>
      <figcaption>{title}</figcaption>
      <pre>{value === null || value === undefined ? 'none' : pretty(value)}</pre>
    </figure>
  );
}

function RotateDialog(props: { open: boolean; onClose: () => void; session: Session; environment: EnvironmentTag; id: string; onRotated: () => void }) {
  const [grace, setGrace] = useState('0');
  const [error, setError] = useState<unknown>(null);
  const [newToken, setNewToken] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const close = () => {
    setNewToken(null);
    setError(null);
    props.onClose();
  };
  const rotate = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      // The token as it is now, read without get-or-create: a group deleted meanwhile stays deleted (404).
      const { user_group } = await props.session.client.lookupUserGroup({ user_group_id: props.id, api_environment_tag: props.environment });
      const current_token = user_group.token;
      const rotated = await props.session.client.rotateToken({ current_token, grace_period_seconds: Number(grace) });
      setNewToken(rotated.user_group.token);
      props.onRotated();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <Dialog title="Rotate the user group token" open={props.open} onClose={close}>
      {newToken ? (
        <ShownOnce label="New user group token" value={newToken} />
      ) : (
        <form onSubmit={rotate}>
          <p>
            <code>{props.id}</code> gets a new token. Dashboards holding the old one keep working for the grace period, then stop working.
          </p>
          <div class="field">
            <label for="grace">Grace period (seconds)</label>
            <input
              id="grace"
              type="number"
              min={GRACE.minimum}
              max={GRACE.maximum}
              value={grace}
              onInput={(event) => setGrace(event.currentTarget.value)}
              aria-describedby="grace-hint"
            />
            <p class="hint" id="grace-hint">
              {GRACE.minimum} to {GRACE.maximum.toLocaleString('en-US')} ({GRACE.maximum / 3600} hours). 0: the old token stops at once.
            </p>
          </div>
          <ErrorAlert error={error} />
          <button type="submit" disabled={busy}>
            Rotate
          </button>
        </form>
      )}
    </Dialog>
  );
}

function DeleteDialog(props: { open: boolean; onClose: () => void; session: Session; environment: EnvironmentTag; id: string; hasChildren: boolean }) {
  const [typed, setTyped] = useState('');
  const [cascade, setCascade] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const remove = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      await props.session.client.deleteUserGroup({ user_group_id: props.id, api_environment_tag: props.environment, ...(cascade ? { cascade: true } : {}) });
      props.onClose();
      navigate(`#/groups?deleted=${encodeURIComponent(props.id)}`);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <Dialog title="Delete the user group" open={props.open} onClose={props.onClose}>
      <form onSubmit={remove}>
        <p>
          Deleting <code>{props.id}</code> ends its token and every embed token issued for it. Its history stays readable.
        </p>
        <div class="field">
          <label for="confirm-id">Type the user_group_id to confirm</label>
          <input id="confirm-id" autoComplete="off" spellcheck={false} value={typed} onInput={(event) => setTyped(event.currentTarget.value)} />
        </div>
        {(props.hasChildren || isUserGroupServiceError(error, 'user_group_has_children')) && (
          <div class="field checkbox">
            <input id="cascade" type="checkbox" checked={cascade} onChange={(event) => setCascade(event.currentTarget.checked)} />
            <label for="cascade">Also delete every group under it (its children, theirs, and so on)</label>
          </div>
        )}
        <ErrorAlert error={error} />
        <button type="submit" class="danger" disabled={typed !== props.id}>
          Delete {props.id}
        </button>
      </form>
    </Dialog>
  );
}
