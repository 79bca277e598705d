// The embedded dashboard's side: it holds only a short-lived embed token, which it gets from
// its own backend through @ugs/embed (packages/embed): the token source renews it before it
// expires, on the server's clock, and tells the page when it cannot. The token is kept in
// sessionStorage, so a reload asks again with the same token (and shows when it stopped
// working, e.g. after the group's token was rotated); "Get a new embed token" fetches another.
// With a data API configured (examples/postgres-rls), the same token fetches the viewer's rows.
import { EmbedTokenSource } from '/embed/index.js';

const PARAMS = new URLSearchParams(location.search);
const CUSTOMER = PARAMS.get('customer'); // which demo customer views
const VIEWER = PARAMS.get('viewer'); // and which of its people, if any
const STORAGE_KEY = ['embed-demo-session', CUSTOMER, VIEWER].filter(Boolean).join(':');
const $ = (id) => document.getElementById(id);
const config = await (await fetch('/config.json')).json();

function setStatus(state, text) {
  $('status').dataset.state = state;
  $('status').textContent = text;
}

/** The backend's answer as stored: its fields, and what the source measured of the token. */
function stored() {
  const text = sessionStorage.getItem(STORAGE_KEY);
  if (!text) return undefined;
  const { ugs_embed: measured, ...answer } = JSON.parse(text);
  return { ...measured, token: answer.embed_token, answer };
}

const backendUrl = new URL(`${config.backendUrl}/embed-session`);
if (CUSTOMER) backendUrl.searchParams.set('customer', CUSTOMER);
if (VIEWER) backendUrl.searchParams.set('viewer', VIEWER);

const tokens = new EmbedTokenSource({
  backend: backendUrl,
  initial: stored(),
  onRenew: ({ answer, expiresAt, lifetimeMs, serverExpiresAt, clock }) => {
    sessionStorage.setItem(STORAGE_KEY, JSON.stringify({ ...answer, ugs_embed: { expiresAt, lifetimeMs, serverExpiresAt, clock } }));
    showToken();
  },
  onError: (error) => setStatus('error', `Cannot renew the embed token: ${error.message}`),
});

function showToken() {
  const session = tokens.current;
  if (!session) return;
  const left = Math.max(0, Math.round(tokens.remainingMs() / 1000));
  $('token-info').textContent =
    `embed token for dashboard "${session.answer.embed_id}", expires ${session.answer.expires_at} (${left} s left by the server's clock); ${tokens.stats.renewals} received by this page`;
}
setInterval(showToken, 1000);

function cells(values) {
  const row = document.createElement('tr');
  for (const value of values) {
    const cell = document.createElement('td');
    cell.textContent = value; // data, never markup
    row.append(cell);
  }
  return row;
}

function render(context) {
  const group = context.user_group;
  $('group-name').textContent = group.name;
  $('group-id').textContent = group.provided_id;
  $('group-env').textContent = group.api_environment_tag;
  $('group-demo').hidden = !group.is_demo_group;
  renderViewer(context.viewer);
  const rows = Object.entries(context.variables).map(([name, value]) => {
    const row = cells([name, typeof value === 'string' ? value : JSON.stringify(value)]);
    row.dataset.variable = name;
    return row;
  });
  $('variables').tBodies[0].replaceChildren(...rows);
  $('group').hidden = false;
}

/** The person the embed token names (`viewer`, absent for a token of the whole customer). */
function renderViewer(viewer) {
  $('viewer').hidden = !viewer;
  $('no-viewer').hidden = Boolean(viewer);
  if (!viewer) return;
  $('viewer-name').textContent = viewer.name ?? viewer.id;
  $('viewer-id').textContent = viewer.id;
  $('viewer-email').textContent = viewer.email ?? '';
  $('viewer-time-zone').textContent = viewer.time_zone ?? 'not given';
  $('viewer-permissions').textContent = (viewer.permissions ?? []).join(', ') || 'none';
}

/** The viewer's rows from the data API: the embed token is all it gets, and all it needs. */
async function loadRows() {
  const { dataApiUrl } = config;
  const status = $('data-status');
  $('data-tables').hidden = true;
  if (!dataApiUrl) {
    status.dataset.state = 'off';
    status.textContent = 'No data API configured: start examples/postgres-rls and set DATA_API_URL on the page server to see rows.';
    return;
  }
  status.dataset.state = 'loading';
  status.textContent = 'Loading rows…';
  const fetchRows = async (path) => {
    const response = await tokens.fetch(`${dataApiUrl}${path}`);
    const body = await response.json();
    if (!response.ok) throw new Error(`${path}: ${response.status} ${body.error?.code}`);
    return body.rows;
  };
  try {
    const [orders, notices] = await Promise.all([fetchRows('/orders'), fetchRows('/notices')]);
    $('orders').tBodies[0].replaceChildren(...orders.map((order) => cells([order.product, order.region, order.amount.toLocaleString('en-US')])));
    $('notices').tBodies[0].replaceChildren(...notices.map((notice) => cells([notice.region, notice.notice])));
    status.dataset.state = 'ok';
    const count = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;
    status.textContent = `${count(orders.length, 'order')} and ${count(notices.length, 'notice')}, chosen by PostgreSQL row-level security from the token's claims`;
    $('data-tables').hidden = false;
  } catch (err) {
    status.dataset.state = 'error';
    status.textContent = `The data API refused the request (${err.message})`;
  }
}

async function load() {
  setStatus('loading', 'Loading…');
  try {
    const { answer } = await tokens.getSession();
    showToken();
    const url = new URL(answer.context_url);
    url.searchParams.set('embed_id', answer.embed_id);
    // A token refused because it had expired is renewed once and sent again; one refused
    // with time left (a rotation revoked it) is shown as it is.
    const response = await tokens.fetch(url);
    const body = await response.json();
    if (body.success === 1) {
      render(body);
      const person = body.viewer ? `${body.viewer.name ?? body.viewer.id}, of ` : '';
      setStatus('ok', `Viewing as ${person}${body.user_group.name}`);
      await loadRows();
    } else if (response.status === 401) {
      $('group').hidden = true;
      setStatus('invalid', `The embed token is no longer valid (${body.error.code}): ${body.error.message}`);
    } else {
      $('group').hidden = true;
      setStatus('error', `The service refused the request (${response.status} ${body.error.code}): ${body.error.message}`);
    }
  } catch (err) {
    $('group').hidden = true;
    setStatus('error', `Could not load the dashboard context: ${err.message}`);
  }
}

for (const link of document.querySelectorAll('#viewers a')) {
  const target = new URL(link.href).searchParams;
  if (target.get('customer') === (CUSTOMER ?? 'acme-corp') && target.get('viewer') === VIEWER) link.setAttribute('aria-current', 'page');
}
$('refresh').addEventListener('click', load);
$('renew').addEventListener('click', async () => {
  sessionStorage.removeItem(STORAGE_KEY);
  try {
    await tokens.renew();
  } catch {
    return; // onError has said why
  }
  load();
});
load();
