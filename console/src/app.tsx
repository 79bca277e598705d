// The console: a sign-in form until a token is given, then the header (account, pages,
// environment, sign out) and the page the URL's fragment names.
import { useEffect, useState } from 'preact/hooks';
import type { EnvironmentTag } from '../../packages/client/src/index.ts';
import { closeSession, openSession, storedEnvironment, storeEnvironment, storedToken, type Session } from './session.ts';
import { useRoute, type Route } from './router.ts';
import { ErrorAlert } from './components/common.tsx';
import { SignIn } from './pages/sign-in.tsx';
import { GroupList } from './pages/group-list.tsx';
import { GroupDetail } from './pages/group-detail.tsx';
import { GroupForm } from './pages/group-form.tsx';
import { TokensPage } from './pages/tokens.tsx';
import { WebhookDeliveriesPage, WebhooksPage } from './pages/webhooks.tsx';
import { SigningKeysPage } from './pages/signing-keys.tsx';
import { TagsPage } from './pages/tags.tsx';

export function App() {
  const [session, setSession] = useState<Session | null>(null);
  const [resuming, setResuming] = useState(() => storedToken() !== null);
  const [resumeError, setResumeError] = useState<unknown>(null);

  // A reload keeps the tab's session: ask the service again who the stored token is.
  useEffect(() => {
    const token = storedToken();
    if (!token) return;
    openSession(token)
      .then(setSession, (error) => {
        closeSession();
        setResumeError(error);
      })
      .finally(() => setResuming(false));
  }, []);

  if (resuming)
    return (
      <p class="status" role="status">
        Signing in…
      </p>
    );
  if (!session) return <SignIn onSignedIn={setSession} initialError={resumeError} />;
  return (
    <Shell
      session={session}
      onSignOut={() => {
        closeSession();
        setSession(null);
        history.replaceState(null, '', location.pathname);
      }}
    />
  );
}

function Shell({ session, onSignOut }: { session: Session; onSignOut: () => void }) {
  const route = useRoute();
  const [environment, setEnvironment] = useState<EnvironmentTag>(() => storedEnvironment(session));
  const chooseEnvironment = (value: EnvironmentTag) => {
    storeEnvironment(value);
    setEnvironment(value);
  };
  const current =
    route.page === 'tokens' || route.page === 'keys' || route.page === 'webhooks' || route.page === 'tags'
      ? route.page
      : route.page === 'webhook'
        ? 'webhooks'
        : route.page === 'not-found'
          ? null
          : 'groups';
  useEffect(() => {
    const titles = {
      groups: 'User groups',
      'new-group': 'New user group',
      group: 'User group',
      'edit-group': 'Edit user group',
      tags: 'Tags',
      tokens: 'API tokens',
      webhooks: 'Webhooks',
      webhook: 'Webhook deliveries',
      keys: 'Signing keys',
      'not-found': 'Not found',
    };
    document.title = `${titles[route.page]} · Console · User Group Service`;
  }, [route.page]);

  return (
    <>
      <a class="skip-link" href="#main">
        Skip to content
      </a>

      <header class="top">
        <div class="brand">
          User Group Service <span>console</span>
        </div>
        <nav aria-label="Pages">
          <a href="#/groups" aria-current={current === 'groups' ? 'page' : undefined}>
            User groups
          </a>
          <a href="#/tags" aria-current={current === 'tags' ? 'page' : undefined}>
            Tags
          </a>
          {session.isAdmin && (
            <a href="#/tokens" aria-current={current === 'tokens' ? 'page' : undefined}>
              API tokens
            </a>
          )}
          {session.isAdmin && (
            <a href="#/webhooks" aria-current={current === 'webhooks' ? 'page' : undefined}>
              Webhooks
            </a>
          )}
          <a href="#/keys" aria-current={current === 'keys' ? 'page' : undefined}>
            Signing keys
          </a>
        </nav>
        <div class="who">
          <label for="environment">Environment</label>
          <select id="environment" value={environment} onChange={(event) => chooseEnvironment(event.currentTarget.value as EnvironmentTag)}>
            {session.environments.map((env) => (
              <option value={env}>{env}</option>
            ))}
          </select>
          <span class="account" title="account and scopes of this API token">
            {session.account} · {session.token.scopes.join(', ')}
          </span>
          <button type="button" class="secondary" onClick={onSignOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Page route={route} session={session} environment={environment} />
      </main>
    </>
  );
}

function Page({ route, session, environment }: { route: Route; session: Session; environment: EnvironmentTag }) {
  switch (route.page) {
    case 'groups':
      return <GroupList session={session} environment={environment} params={route.params} />;
    case 'new-group':
      return session.canWrite ? (
        <GroupForm session={session} environment={environment} />
      ) : (
        <ErrorAlert error={new Error('creating user groups needs an API token with the write scope')} />
      );
    case 'group':
      return <GroupDetail session={session} environment={route.environment as EnvironmentTag} id={route.id} saved={route.params.has('saved')} />;
    case 'edit-group':
      return session.canWrite ? (
        <GroupForm session={session} environment={route.environment as EnvironmentTag} editId={route.id} />
      ) : (
        <ErrorAlert error={new Error('editing user groups needs an API token with the write scope')} />
      );
    case 'tags':
      return <TagsPage session={session} environment={environment} />;
    case 'tokens':
      return session.isAdmin ? (
        <TokensPage session={session} />
      ) : (
        <ErrorAlert error={new Error('managing API tokens needs an API token with the admin scope')} />
      );
    case 'webhooks':
    case 'webhook':
      return session.isAdmin ? (
        route.page === 'webhook' ? (
          <WebhookDeliveriesPage session={session} id={route.id} />
        ) : (
          <WebhooksPage session={session} />
        )
      ) : (
        <ErrorAlert error={new Error('managing webhooks needs an API token with the admin scope')} />
      );
    case 'keys':
      return <SigningKeysPage session={session} />;
    case 'not-found':
      return <NotFound fragment={route.fragment} />;
  }
}

function NotFound({ fragment }: { fragment: string }) {
  return (
    <section aria-labelledby="not-found-title">
      <h1 id="not-found-title">No such page</h1>
      <p>
        The console has no page at <code>#{fragment}</code>. A link to a user group may have been cut short or mistyped.
      </p>
      <p>
        <a href="#/groups">Go to the user groups</a>
      </p>
    </section>
  );
}
