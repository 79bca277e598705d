// Sign in by pasting an API token. The service is asked who the token is before anything is
// kept; a token that is not valid is never stored.
import { useState } from 'preact/hooks';
import { openSession, type Session } from '../session.ts';
import { describeError } from '../components/common.tsx';

export function SignIn({ onSignedIn, initialError }: { onSignedIn: (session: Session) => void; initialError: unknown }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<unknown>(initialError);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onSignedIn(await openSession(token.trim()));
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };

  return (
    <main class="sign-in" id="main">
      <h1>User Group Service console</h1>
      <form onSubmit={submit} noValidate>
        <div class="field">
          <label for="api-token">API token</label>
          <input
            id="api-token"
            type="password"
            autoComplete="off"
            spellcheck={false}
            value={token}
            required
            aria-describedby="api-token-hint"
            aria-invalid={error ? true : undefined}
            onInput={(event) => setToken(event.currentTarget.value)}
          />
          <p class="hint" id="api-token-hint">
            Paste an API token (<code>ugs_api_…</code>). It is kept in this tab only and sent only to this service; closing the tab or signing out forgets it.
          </p>
        </div>
        {error ? (
          <p class="alert error" role="alert">
            Could not sign in: {describeError(error)}
          </p>
        ) : null}
        <button type="submit" disabled={busy || token.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
