// The embed preview of a group: exactly what a dashboard gets, from a real one-minute embed
// token through the embed route, minted only when asked (every token minted is a signature and
// a claim on the rate budget, and a person reading a group rarely needs one). Optionally as
// one viewer of the group (docs/api.md, "The viewer"): an id and attributes, which the
// variables then show as viewer_attributes, beside the group's properties (never over them).
import { useEffect, useState } from 'preact/hooks';
import type { EmbedContextResponse, EmbedViewer, EnvironmentTag } from '../../../packages/client/src/index.ts';
import type { Session } from '../session.ts';
import { ErrorAlert, ScrollingTable } from '../components/common.tsx';
import { JsonEditor, jsonProblem } from '../components/json-editor.tsx';

interface Props {
  session: Session;
  environment: EnvironmentTag;
  id: string;
  /** The group's updated_at: a preview is forgotten when the group changes (its variables may have). */
  version: string;
}

export function EmbedPreview({ session, environment, id, version }: Props) {
  const [state, setState] = useState<{ data?: EmbedContextResponse; error?: unknown; loading: boolean }>({ loading: false });
  const [viewerId, setViewerId] = useState('');
  const [attributes, setAttributes] = useState('');
  useEffect(() => setState({ loading: false }), [environment, id, version]);

  const show = async () => {
    setState({ loading: true });
    try {
      const viewer: EmbedViewer | undefined =
        viewerId === '' ? undefined : { id: viewerId, ...(attributes.trim() ? { attributes: JSON.parse(attributes) } : {}) };
      const { embed_token } = await session.client.createEmbedToken({ user_group_id: id, api_environment_tag: environment, expires_in_seconds: 60, viewer });
      setState({ data: await session.client.getEmbedContext(embed_token), loading: false });
    } catch (error) {
      setState({ error, loading: false });
    }
  };
  const data = state.data;

  return (
    <section aria-labelledby="preview-title">
      <h2 id="preview-title">Embed preview</h2>
      <p class="hint">
        Exactly what a dashboard gets: the variables of GET /api/embed/context, called with a fresh one-minute embed token, minted when you ask.
      </p>
      <details class="viewer-preview">
        <summary>As one viewer of the group (optional)</summary>
        <div class="field">
          <label for="preview-viewer-id">Viewer id</label>
          <input
            id="preview-viewer-id"
            value={viewerId}
            aria-describedby="preview-viewer-id-hint"
            onInput={(event) => setViewerId(event.currentTarget.value)}
          />
          <p class="hint" id="preview-viewer-id-hint">
            Your id for the person. Empty: the whole group, as a user group token sees it.
          </p>
        </div>
        <JsonEditor
          id="preview-viewer-attributes"
          label="Viewer attributes"
          hint='A flat JSON object of strings, numbers and booleans, such as {"region": "amer"}: the variable viewer_attributes. They never replace the group’s properties; names the service uses (sub, ugs_…, user_group_id, viewer_id…) are refused.'
          value={attributes}
          onInput={setAttributes}
        />
      </details>
      <button type="button" class="secondary" onClick={show} disabled={state.loading || (viewerId !== '' && jsonProblem(attributes) !== null)}>
        {data ? 'Show again' : 'Show the dashboard variables'}
      </button>
      {state.error ? <ErrorAlert error={state.error} /> : null}
      {data?.viewer && (
        <p class="viewer-shown">
          As viewer <code>{data.viewer.id}</code>
        </p>
      )}
      {data && (
        <ScrollingTable label="Dashboard variables">
          <table class="variables">
            <caption>Dashboard variables</caption>
            <thead>
              <tr>
                <th scope="col">Variable</th>
                <th scope="col">Value</th>
              </tr>
            </thead>
            <tbody>
              {Object.entries(data.variables).map(([name, value]) => (
                <tr>
                  <th scope="row">
                    <code>{name}</code>
                  </th>
                  <td>
                    <code>{typeof value === 'string' ? value : JSON.stringify(value)}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollingTable>
      )}
    </section>
  );
}
