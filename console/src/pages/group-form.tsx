// Create or edit a user group. The API's validation `details` are shown next to the field
// they name; mapping and properties are JSON editors that point at a syntax error before
// anything is sent. A new group's token is shown once.
import { useEffect, useState } from 'preact/hooks';
import type { EnvironmentTag, UserGroupWithoutToken } from '../../../packages/client/src/index.ts';
import { isUserGroupServiceError, requestFields } from '../../../packages/client/src/index.ts';
import type { Session } from '../session.ts';
import { groupHref, navigate } from '../router.ts';
import { findGroup, pretty } from '../groups.ts';
import { ErrorAlert, ShownOnce, lengthProblem } from '../components/common.tsx';
import { JsonEditor, jsonProblem } from '../components/json-editor.tsx';
import { TagSuggestions } from '../components/tag-suggestions.tsx';

/** The request fields and their limits, from the OpenAPI document (docs/api.md, "The user group"). */
const FIELDS = requestFields.UpdateUserGroupRequest;
type FieldName = keyof typeof FIELDS;
interface FieldSpec {
  type?: string;
  description?: string;
  maxLength?: number;
}
const specOf = (field: string): FieldSpec => (FIELDS as Record<string, FieldSpec>)[field] ?? {};

/** The fields this form has widgets of its own for; every other field of the request gets a plain input. */
const OWN_WIDGETS = new Set<string>([
  'user_group_id',
  'new_user_group_id',
  'api_environment_tag',
  'name',
  'is_demo_group',
  'parent_user_group_id',
  'hierarchy_level',
  'group_tags',
  'mapping',
  'properties',
]);
const OTHER_FIELDS = (Object.keys(FIELDS) as FieldName[]).filter((field) => !OWN_WIDGETS.has(field));

/** What the form holds: text for every field, a flag for the booleans. */
type Draft = Record<string, string | boolean>;

const EMPTY: Draft = {
  user_group_id: '',
  name: '',
  is_demo_group: false,
  parent_user_group_id: '',
  hierarchy_level: '',
  group_tags: '',
  mapping: '',
  properties: '',
};

function draftOf(group: UserGroupWithoutToken): Draft {
  const shown = group as unknown as Record<string, unknown>;
  const draft: Draft = {
    user_group_id: group.provided_id,
    name: group.name,
    is_demo_group: group.is_demo_group,
    parent_user_group_id: group.parent_user_group_id ?? '',
    hierarchy_level: group.hierarchy_level ?? '',
    group_tags: group.group_tags.join(', '),
    mapping: pretty(group.mapping),
    properties: pretty(group.properties),
  };
  for (const field of OTHER_FIELDS) {
    const value = shown[field];
    draft[field] = typeof value === 'boolean' ? value : value === null || value === undefined ? '' : String(value);
  }
  return draft;
}

/** The request body: empty optional fields are left out on create and cleared (null) on edit. */
function bodyOf(draft: Draft, editing: boolean) {
  const textOf = (field: string) => String(draft[field] ?? '');
  const orNull = (field: string) => (textOf(field).trim() === '' ? (editing ? null : undefined) : textOf(field).trim());
  const json = (field: string) => (textOf(field).trim() === '' ? (editing ? null : undefined) : JSON.parse(textOf(field)));
  const body: Record<string, unknown> = {
    name: textOf('name').trim() === '' ? undefined : draft.name,
    is_demo_group: draft.is_demo_group,
    parent_user_group_id: orNull('parent_user_group_id'),
    hierarchy_level: orNull('hierarchy_level'),
    group_tags: textOf('group_tags')
      .split(',')
      .map((tag) => tag.trim())
      .filter(Boolean),
    mapping: json('mapping'),
    properties: json('properties'),
  };
  for (const field of OTHER_FIELDS) {
    const spec = specOf(field);
    const value = draft[field];
    if (typeof value === 'boolean') body[field] = value;
    else if (spec.type === 'integer' || spec.type === 'number') body[field] = value.trim() === '' ? (editing ? null : undefined) : Number(value);
    else body[field] = orNull(field);
  }
  return body;
}

/** `properties.plan` and `properties` both belong to the properties editor. */
const fieldOf = (detailField: string) => detailField.split(/[.[]/)[0];

/** An over-long text field's problem (lengthProblem): booleans and fields without a limit have none. */
function fieldLengthProblem(value: string | boolean, spec: FieldSpec): string | undefined {
  return typeof value === 'string' ? lengthProblem(value, spec.maxLength) : undefined;
}

export function GroupForm({ session, environment, editId }: { session: Session; environment: EnvironmentTag; editId?: string }) {
  const editing = editId !== undefined;
  const [draft, setDraft] = useState<Draft>(EMPTY);
  // Editing: the form appears once the group is read, so nothing typed is overwritten by the read.
  const [loaded, setLoaded] = useState(!editing);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState<{ id: string; token: string } | null>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (!editId) return;
    setLoaded(false);
    findGroup(session.client, environment, editId).then((group) => {
      if (!group) return setLoadError(new Error(`no user group "${editId}" in ${environment}`));
      setDraft(draftOf(group));
      setLoaded(true);
    }, setLoadError);
  }, [editId, environment]);

  const problems = { mapping: jsonProblem(String(draft.mapping)), properties: jsonProblem(String(draft.properties)) };
  const details = isUserGroupServiceError(error) ? error.details : [];
  const serverError = (field: string) => {
    const found = details.filter((detail) => fieldOf(detail.field) === field);
    if (found.length === 0) return undefined;
    // One problem: the service's own sentence says it best ("name must be at most 256 characters").
    if (details.length === 1 && error instanceof Error) return error.message;
    return found.map((detail) => `${detail.field}: ${detail.issue.replace(/_/g, ' ')}`).join('; ');
  };
  const set = (key: string, value: string | boolean) => setDraft({ ...draft, [key]: value });
  const tooLong = Object.keys(draft).filter((field) => fieldLengthProblem(draft[field], specOf(field)));

  const submit = async (event: Event) => {
    event.preventDefault();
    if (problems.mapping || problems.properties) {
      document.getElementById(problems.mapping ? 'mapping' : 'properties')?.focus();
      return;
    }
    if (tooLong.length > 0) {
      document.getElementById(tooLong[0])?.focus();
      return;
    }
    setBusy(true);
    setError(null);
    try {
      if (editing) {
        const { user_group } = await session.client.updateUserGroup({ user_group_id: editId, api_environment_tag: environment, ...bodyOf(draft, true) });
        // Back to the group, as saved (its new id after a rename), saying so.
        navigate(`${groupHref(environment, user_group.provided_id)}?saved`);
        return;
      }
      const { user_group } = await session.client.createUserGroup({
        user_group_id: String(draft.user_group_id),
        api_environment_tag: environment,
        ...bodyOf(draft, false),
      });
      setSaved({ id: user_group.provided_id, token: user_group.token });
    } catch (err) {
      setError(err);
      // Focus the first field the service named, so the message next to it is read out.
      const first = isUserGroupServiceError(err) ? err.details[0] : undefined;
      if (first) document.getElementById(fieldOf(first.field))?.focus();
    } finally {
      setBusy(false);
    }
  };

  if (loadError) return <ErrorAlert error={loadError} />;
  if (!loaded) return <p role="status">Reading {editId}…</p>;
  if (saved) {
    return (
      <section aria-labelledby="saved-title">
        <h1 id="saved-title">Created {saved.id}</h1>
        <ShownOnce label="User group token" value={saved.token} />
        <p>
          <a class="button" href={groupHref(environment, saved.id)}>
            Open {saved.id}
          </a>
        </p>
      </section>
    );
  }

  const text = (id: string, label: string, hint: string, extra: Record<string, unknown> = {}) => {
    const spec = specOf(id);
    const message = fieldLengthProblem(draft[id], spec) ?? serverError(id);
    return (
      <div class="field">
        <label for={id}>{label}</label>
        <input
          id={id}
          value={draft[id] as string}
          aria-invalid={message ? true : undefined}
          aria-describedby={`${id}-hint${message ? ` ${id}-error` : ''}`}
          onInput={(event) => set(id, event.currentTarget.value)}
          {...extra}
        />
        <p class="hint" id={`${id}-hint`}>
          {hint}
        </p>
        {message && (
          <p class="field-error" id={`${id}-error`}>
            {message}
          </p>
        )}
      </div>
    );
  };

  return (
    <section aria-labelledby="form-title">
      <p class="breadcrumb">
        <a href="#/groups">User groups</a> / {environment}
      </p>
      <h1 id="form-title">{editing ? `Edit ${editId}` : `New user group in ${environment}`}</h1>
      <form class="group-form" onSubmit={submit} noValidate>
        {!editing &&
          text('user_group_id', 'user_group_id', 'Your id for the customer: 1-256 characters, unique in the environment.', {
            required: true,
            autoComplete: 'off',
          })}
        {text('name', 'Name', 'Shown to people; the user_group_id when empty.')}
        <div class="field checkbox">
          <input
            id="is_demo_group"
            type="checkbox"
            checked={draft.is_demo_group === true}
            onChange={(event) => set('is_demo_group', event.currentTarget.checked)}
          />
          <label for="is_demo_group">Demo group (dashboards show a watermark)</label>
        </div>
        {text('parent_user_group_id', 'Parent', "The parent's user_group_id, or empty for none.")}
        {text('hierarchy_level', 'Level', "One of the account's level names, or empty.")}
        {text('group_tags', 'Tags', 'Comma-separated; the tags in use are offered below as you type.')}
        <TagSuggestions
          session={session}
          environment={environment}
          value={String(draft.group_tags)}
          fieldId="group_tags"
          onPick={(value) => set('group_tags', value)}
        />
        <JsonEditor
          id="properties"
          label="Properties"
          hint="A JSON object: the variables dashboards get (with the ancestors' properties)."
          value={draft.properties as string}
          onInput={(value) => set('properties', value)}
          serverError={serverError('properties')}
        />
        <JsonEditor
          id="mapping"
          label="Mapping"
          hint="A JSON object mapping data-source keys to ids."
          value={draft.mapping as string}
          onInput={(value) => set('mapping', value)}
          serverError={serverError('mapping')}
        />
        {OTHER_FIELDS.map((field) => {
          const spec = specOf(field);
          if (spec.type === 'boolean') {
            return (
              <div class="field checkbox">
                <input id={field} type="checkbox" checked={draft[field] === true} onChange={(event) => set(field, event.currentTarget.checked)} />
                <label for={field}>{field}</label>
              </div>
            );
          }
          return text(field, field, spec.description ?? '', spec.type === 'integer' || spec.type === 'number' ? { type: 'number' } : {});
        })}
        {error ? (
          <p class="alert error" role="alert">
            {isUserGroupServiceError(error, 'validation_failed') ? 'The service refused some fields: see the messages next to them.' : null}{' '}
            {isUserGroupServiceError(error) ? `${error.message} (${error.code})` : String(error)}
          </p>
        ) : null}
        <div class="form-actions">
          <button type="submit" disabled={busy}>
            {editing ? 'Save' : 'Create'}
          </button>
          <a class="button secondary" href={editing ? groupHref(environment, editId) : '#/groups'}>
            Cancel
          </a>
        </div>
      </form>
    </section>
  );
}
