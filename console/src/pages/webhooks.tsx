// The account's webhook endpoints, for an admin token: add one (its secret shown once), list
// them (never a secret), send a test event, rotate the secret, enable a disabled one, delete;
// and one endpoint's latest deliveries with every attempt (docs/api.md, "Webhooks").
import { useState } from 'preact/hooks';
import { eventTypes, type CreateWebhookEndpointParams, type EventType } from '../../../packages/client/src/index.ts';
import type { Session } from '../session.ts';
import { ANY_ENVIRONMENT, ConfirmDialog, ErrorAlert, ScrollingTable, ShownOnce, Status, formatTime, useLoad } from '../components/common.tsx';

/** The types an endpoint may take, from the OpenAPI document (npm run generate:client). */
const EVENT_TYPES: readonly EventType[] = eventTypes;

export const webhookHref = (id: number) => `#/webhooks/${id}`;

export function WebhooksPage({ session }: { session: Session }) {
  const endpoints = useLoad(() => session.client.listWebhookEndpoints(), []);
  const [deleting, setDeleting] = useState<{ id: number; url: string } | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const [secret, setSecret] = useState<{ id: number; value: string } | null>(null);
  const [error, setError] = useState<unknown>(null);

  const test = async (id: number) => {
    setError(null);
    setStatus(null);
    try {
      const { delivered, attempt } = await session.client.testWebhookEndpoint(id);
      setStatus(
        delivered
          ? `Test event delivered to endpoint ${id}: HTTP ${attempt.status_code} in ${attempt.duration_ms} ms.`
          : `Test event to endpoint ${id} failed: ${attempt.error ?? `HTTP ${attempt.status_code}`}.`,
      );
    } catch (err) {
      setError(err);
    }
  };
  const rotate = async (id: number) => {
    setError(null);
    try {
      const { webhook_endpoint } = await session.client.rotateWebhookSecret(id);
      setSecret({ id, value: webhook_endpoint.secret });
      setStatus(`New secret for endpoint ${id}: the old one also signs for 24 hours.`);
      endpoints.reload();
    } catch (err) {
      setError(err);
    }
  };

  const enable = async (id: number) => {
    setError(null);
    try {
      await session.client.enableWebhookEndpoint(id);
      setStatus(`Endpoint ${id} is enabled: its pending deliveries are sent again now.`);
      endpoints.reload();
    } catch (err) {
      setError(err);
    }
  };

  return (
    <section aria-labelledby="webhooks-title">
      <h1 id="webhooks-title">Webhooks of {session.account}</h1>
      <CreateEndpoint session={session} onCreated={endpoints.reload} />
      <Status message={status} />
      <ErrorAlert error={error ?? endpoints.error} />
      {secret && <ShownOnce label={`New secret of endpoint ${secret.id}`} value={secret.value} />}
      <ScrollingTable label="Webhook endpoints">
        <table class="webhooks">
          <caption>Endpoints, oldest first. Secrets are never shown again.</caption>
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">URL</th>
              <th scope="col">Events</th>
              <th scope="col">Environment</th>
              <th scope="col">Status</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {endpoints.data?.webhook_endpoints.map((endpoint) => (
              <tr data-endpoint-id={endpoint.id}>
                <td>{endpoint.id}</td>
                <td>
                  <code>{endpoint.url}</code>
                  {endpoint.description && <div class="muted">{endpoint.description}</div>}
                  <div>
                    <a href={webhookHref(endpoint.id)} aria-label={`Deliveries of endpoint ${endpoint.id}`}>
                      Deliveries
                    </a>
                  </div>
                </td>
                <td>{endpoint.types ? endpoint.types.join(', ') : 'all'}</td>
                <td>{endpoint.environment ?? ANY_ENVIRONMENT}</td>
                <td>
                  <span class={`badge ${endpoint.status === 'enabled' ? 'active' : 'revoked'}`}>{endpoint.status}</span>
                  {endpoint.failing_since && <div class="muted">failing since {formatTime(endpoint.failing_since)}</div>}
                </td>
                <td>{formatTime(endpoint.created_at)}</td>
                <td class="actions">
                  <button type="button" class="secondary small" onClick={() => test(endpoint.id)} aria-label={`Send a test event to endpoint ${endpoint.id}`}>
                    Send a test event
                  </button>
                  {endpoint.status === 'disabled' && (
                    <button type="button" class="small" onClick={() => enable(endpoint.id)} aria-label={`Enable endpoint ${endpoint.id}`}>
                      Enable
                    </button>
                  )}
                  <button type="button" class="secondary small" onClick={() => rotate(endpoint.id)} aria-label={`Rotate secret of endpoint ${endpoint.id}`}>
                    Rotate secret
                  </button>
                  <button
                    type="button"
                    class="danger small"
                    onClick={() => setDeleting({ id: endpoint.id, url: endpoint.url })}
                    aria-label={`Delete endpoint ${endpoint.id}`}
                  >
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </ScrollingTable>
      {endpoints.data?.webhook_endpoints.length === 0 && <p class="muted">No endpoint yet.</p>}

      <DeleteDialog
        session={session}
        target={deleting}
        onClose={() => setDeleting(null)}
        onDeleted={(id) => {
          setDeleting(null);
          setStatus(`Deleted endpoint ${id}.`);
          endpoints.reload();
        }}
      />
    </section>
  );
}

function CreateEndpoint({ session, onCreated }: { session: Session; onCreated: () => void }) {
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [types, setTypes] = useState<EventType[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [created, setCreated] = useState<string | null>(null);

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    setCreated(null);
    const params: CreateWebhookEndpointParams = { url: url.trim() };
    if (types.length > 0) params.types = types;
    if (description.trim()) params.description = description.trim();
    try {
      const { webhook_endpoint } = await session.client.createWebhookEndpoint(params);
      setCreated(webhook_endpoint.secret);
      setUrl('');
      setDescription('');
      setTypes([]);
      onCreated();
    } catch (err) {
      setError(err);
    }
  };
  const toggle = (type: EventType, on: boolean) => setTypes(on ? [...types, type] : types.filter((t) => t !== type));

  return (
    <form class="create-webhook" onSubmit={submit} aria-labelledby="create-webhook-title">
      <h2 id="create-webhook-title">Add an endpoint</h2>
      <div class="row">
        <div class="field wide">
          <label for="webhook-url">URL</label>
          <input
            id="webhook-url"
            type="url"
            required
            value={url}
            onInput={(event) => setUrl(event.currentTarget.value)}
            placeholder="https://example.com/ugs-webhooks"
          />
        </div>
        <div class="field">
          <label for="webhook-description">Description</label>
          <input id="webhook-description" value={description} onInput={(event) => setDescription(event.currentTarget.value)} placeholder="what it is for" />
        </div>
      </div>
      <fieldset class="field">
        <legend>Events (none checked: every type)</legend>
        {EVENT_TYPES.map((type) => (
          <span class="checkbox">
            <input id={`type-${type}`} type="checkbox" checked={types.includes(type)} onChange={(event) => toggle(type, event.currentTarget.checked)} />
            <label for={`type-${type}`}>{type}</label>
          </span>
        ))}
      </fieldset>
      <ErrorAlert error={error} />
      <button type="submit" disabled={url.trim() === ''}>
        Add endpoint
      </button>
      {created && <ShownOnce label="Signing secret" value={created} />}
    </form>
  );
}

function DeleteDialog(props: { session: Session; target: { id: number; url: string } | null; onClose: () => void; onDeleted: (id: number) => void }) {
  return (
    <ConfirmDialog
      title="Delete the webhook endpoint"
      open={props.target !== null}
      onClose={props.onClose}
      confirmLabel={`Delete endpoint ${props.target?.id}`}
      confirm={async () => {
        await props.session.client.deleteWebhookEndpoint(props.target!.id);
        props.onDeleted(props.target!.id);
      }}
    >
      <p>
        <code>{props.target?.url}</code> receives nothing more, and its pending deliveries are dropped.
      </p>
    </ConfirmDialog>
  );
}

export function WebhookDeliveriesPage({ session, id }: { session: Session; id: number }) {
  const deliveries = useLoad(() => session.client.listWebhookDeliveries(id, { limit: 50 }), [id]);
  return (
    <section aria-labelledby="deliveries-title">
      <p>
        <a href="#/webhooks">All endpoints</a>
      </p>
      <h1 id="deliveries-title">Deliveries of endpoint {id}</h1>
      <ErrorAlert error={deliveries.error} />
      {deliveries.data?.deliveries.length === 0 && <p class="muted">Nothing delivered yet: send a test event from the endpoints page.</p>}
      <ScrollingTable label="Deliveries">
        <table class="deliveries">
          <caption>The latest deliveries, newest first, with every attempt.</caption>
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">webhook-id</th>
              <th scope="col">Status</th>
              <th scope="col">Attempts</th>
              <th scope="col">Next attempt</th>
            </tr>
          </thead>
          <tbody>
            {deliveries.data?.deliveries.map((delivery) => (
              <tr data-delivery-id={delivery.id}>
                <td>
                  {delivery.event_id} · {delivery.event_type}
                </td>
                <td>
                  <code>{delivery.webhook_id}</code>
                </td>
                <td>
                  <span class={`badge ${delivery.status === 'delivered' ? 'active' : delivery.status === 'failed' ? 'revoked' : 'expired'}`}>
                    {delivery.status}
                  </span>
                </td>
                <td>
                  <ol class="attempts">
                    {delivery.attempts.map((attempt) => (
                      <li>
                        {formatTime(attempt.attempted_at)}: {attempt.status_code === null ? 'no answer' : `HTTP ${attempt.status_code}`} in{' '}
                        {attempt.duration_ms} ms
                        {attempt.error && attempt.status_code === null ? ` (${attempt.error})` : ''}
                      </li>
                    ))}
                  </ol>
                </td>
                <td>{delivery.status === 'pending' ? formatTime(delivery.next_attempt_at) : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </ScrollingTable>
    </section>
  );
}
