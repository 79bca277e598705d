// The embedded dashboard's side: it holds only a short-lived embed token, which it got from
// its own backend, and asks the User Group Service who is viewing. The token is kept in
// sessionStorage, so a reload asks again with the same token (and shows when it stopped
// working, e.g. after the group's token was rotated); "Get a new embed token" fetches another.
// With a data API configured (examples/postgres-rls), the same token fetches the viewer's rows.
const PARAMS = new URLSearchParams(location.search);
const CUSTOMER = PARAMS.get('customer'); // which demo customer views
const VIEWER = PARAMS.get('viewer'); // and which of its people, if any
const STORAGE_KEY = ['embed-demo-session', CUSTOMER, VIEWER].filter(Boolean).join(':');
const $ = (id) => document.getElementById(id);
let config;

async function loadConfig() {
  config ??= await (await fetch('/config.json')).json();
  return config;
}

function setStatus(state, text) {
  $('status').dataset.state = state;
  $('status').textContent = text;
}

async function newSession() {
  const { backendUrl } = await loadConfig();
  const url = new URL(`${backendUrl}/embed-session`);
  if (CUSTOMER) url.searchParams.set('customer', CUSTOMER);
  if (VIEWER) url.searchParams.set('viewer', VIEWER);
  const response = await fetch(url);
  if (!response.ok) throw new Error(`the backend could not create an embed session (${response.status})`);
  const session = await response.json();
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
  return session;
}

async function currentSession() {
  const stored = sessionStorage.getItem(STORAGE_KEY);
  return stored ? JSON.parse(stored) : newSession();
}

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
async function loadRows(session) {
  const { dataApiUrl } = await loadConfig();
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
    const response = await fetch(`${dataApiUrl}${path}`, { headers: { authorization: `Bearer ${session.embed_token}` } });
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
    const session = await currentSession();
    $('token-info').textContent = `embed token for dashboard "${session.embed_id}", expires ${session.expires_at}`;
    const url = new URL(session.context_url);
    url.searchParams.set('embed_id', session.embed_id);
    const response = await fetch(url, { headers: { authorization: `Bearer ${session.embed_token}` } });
    const body = await response.json();
    if (body.success === 1) {
      render(body);
      const person = body.viewer ? `${body.viewer.name ?? body.viewer.id}, of ` : '';
      setStatus('ok', `Viewing as ${person}${body.user_group.name}`);
      await loadRows(session);
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
$('renew').addEventListener('click', () => {
  sessionStorage.removeItem(STORAGE_KEY);
  load();
});
load();
