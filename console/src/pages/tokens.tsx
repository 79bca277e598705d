// The account's API tokens, for an admin token: create one (its value shown once), list them
// (never a value), revoke one, and who did what.
import { useState } from 'preact/hooks';
import type { CreateApiTokenParams } from '../../../packages/client/src/index.ts';
import type { Session } from '../session.ts';
import {
  ANY_ENVIRONMENT,
  ConfirmDialog,
  ErrorAlert,
  ScrollingTable,
  ShownOnce,
  Status,
  Timeline,
  actedBy,
  formatTime,
  useLoad,
} from '../components/common.tsx';

type ScopeName = 'read' | 'write' | 'admin';

export function TokensPage({ session }: { session: Session }) {
  const tokens = useLoad(() => session.client.listApiTokens(), []);
  const history = useLoad(() => session.client.getApiTokenHistory({ limit: 20 }), [tokens.data]);
  const [revoking, setRevoking] = useState<{ id: number; name: string } | null>(null);
  const [status, setStatus] = useState<string | null>(null);

  return (
    <section aria-labelledby="tokens-title">
      <h1 id="tokens-title">API tokens of {session.account}</h1>
      <CreateToken session={session} onCreated={tokens.reload} />
      <Status message={status} />
      {tokens.error ? <ErrorAlert error={tokens.error} /> : null}
      <ScrollingTable label="API tokens">
        <table class="tokens">
          <caption>Tokens, oldest first. Values are never shown again.</caption>
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Name</th>
              <th scope="col">Starts with</th>
              <th scope="col">Scopes</th>
              <th scope="col">Environment</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">Expires</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {tokens.data?.api_tokens.map((token) => (
              <tr data-token-id={token.id}>
                <td>{token.id}</td>
                <td>{token.name ?? '—'}</td>
                <td>
                  <code>{token.token_start}…</code>
                </td>
                <td>{token.scopes.join(', ')}</td>
                <td>{token.allowed_environment ?? ANY_ENVIRONMENT}</td>
                <td>
                  <span class={`badge ${token.status}`}>{token.status}</span>
                  {token.id === session.token.id && <span class="muted"> (this one)</span>}
                </td>
                <td>{formatTime(token.created_at)}</td>
                <td>{token.expires_at ? formatTime(token.expires_at) : 'never'}</td>
                <td>
                  {token.status === 'active' && (
                    <button
                      type="button"
                      class="danger small"
                      onClick={() => setRevoking({ id: token.id, name: token.name ?? `token ${token.id}` })}
                      aria-label={`Revoke ${token.name ?? `token ${token.id}`}`}
                    >
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </ScrollingTable>

      <section aria-labelledby="token-history-title">
        <h2 id="token-history-title">History</h2>
        <Timeline entries={history.data?.entries}>
          {(entry) => (
            <p>
              Token {entry.api_token_id} {entry.action === 'api_token.issue' ? 'issued' : 'revoked'} {actedBy(entry)}
            </p>
          )}
        </Timeline>
      </section>

      <RevokeDialog
        session={session}
        target={revoking}
        onClose={() => setRevoking(null)}
        onRevoked={(name) => {
          setRevoking(null);
          setStatus(`Revoked ${name}.`);
          tokens.reload();
        }}
      />
    </section>
  );
}

function CreateToken({ session, onCreated }: { session: Session; onCreated: () => void }) {
  // Only what this token has may be granted (write includes read).
  const grantable = (['read', 'write', 'admin'] as ScopeName[]).filter(
    (scope) => session.token.scopes.includes(scope) || (scope === 'read' && session.canWrite),
  );
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<ScopeName[]>(['read']);
  const [environment, setEnvironment] = useState<string>(session.token.allowed_environment ?? ANY_ENVIRONMENT);
  const [days, setDays] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [created, setCreated] = useState<string | null>(null);

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setCreated(null);
    const params: CreateApiTokenParams = { scopes, allowed_environment: environment === ANY_ENVIRONMENT ? null : (environment as 'Customer' | 'Testing') };
    if (name.trim()) params.name = name.trim();
    if (days.trim()) params.expires_in_seconds = Math.round(Number(days) * 86_400);
    try {
      const { token } = await session.client.createApiToken(params);
      setCreated(token);
      setName('');
      onCreated();
    } catch (err) {
      setError(err);
    }
  };
  const toggle = (scope: ScopeName, on: boolean) => setScopes(on ? [...scopes, scope] : scopes.filter((s) => s !== scope));

  return (
    <form class="create-token" onSubmit={submit} aria-labelledby="create-token-title">
      <h2 id="create-token-title">Create an API token</h2>
      <div class="row">
        <div class="field">
          <label for="token-name">Name</label>
          <input id="token-name" value={name} onInput={(event) => setName(event.currentTarget.value)} placeholder="what it is for" />
        </div>
        <fieldset class="field">
          <legend>Scopes</legend>
          {grantable.map((scope) => (
            <span class="checkbox">
              <input id={`scope-${scope}`} type="checkbox" checked={scopes.includes(scope)} onChange={(event) => toggle(scope, event.currentTarget.checked)} />
              <label for={`scope-${scope}`}>{scope}</label>
            </span>
          ))}
        </fieldset>
        <div class="field">
          <label for="token-environment">Environment</label>
          <select id="token-environment" value={environment} onChange={(event) => setEnvironment(event.currentTarget.value)}>
            {(session.token.allowed_environment ? [session.token.allowed_environment] : [ANY_ENVIRONMENT, 'Customer', 'Testing']).map((env) => (
              <option value={env}>{env}</option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="token-days">Expires in (days)</label>
          <input
            id="token-days"
            type="number"
            min={1}
            value={days}
            onInput={(event) => setDays(event.currentTarget.value)}
            placeholder={session.token.expires_at ? 'with this token' : 'never'}
          />
        </div>
      </div>
      <ErrorAlert error={error} />
      <button type="submit" disabled={scopes.length === 0}>
        Create token
      </button>
      {created && <ShownOnce label="New API token" value={created} />}
    </form>
  );
}

function RevokeDialog(props: { session: Session; target: { id: number; name: string } | null; onClose: () => void; onRevoked: (name: string) => void }) {
  return (
    <ConfirmDialog
      title="Revoke the API token"
      open={props.target !== null}
      onClose={props.onClose}
      confirmLabel={`Revoke ${props.target?.name}`}
      confirm={async () => {
        await props.session.client.revokeApiToken(props.target!.id);
        props.onRevoked(props.target!.name);
      }}
    >
      <p>{props.target?.name} stops working within a second. This cannot be undone.</p>
    </ConfirmDialog>
  );
}
