// The embedded dashboard's side: it holds only a short-lived embed token, which it got from
// its own backend, and asks the User Group Service who is viewing. The token is kept in
// sessionStorage, so a reload asks again with the same token (and shows when it stopped
// working, e.g. after the group's token was rotated); "Get a new embed token" fetches another.
const STORAGE_KEY = 'embed-demo-session';
const $ = (id) => document.getElementById(id);

function setStatus(state, text) {
  $('status').dataset.state = state;
  $('status').textContent = text;
}

async function newSession() {
  const { backendUrl } = await (await fetch('/config.json')).json();
  const response = await fetch(`${backendUrl}/embed-session`);
  if (!response.ok) throw new Error(`the backend could not create an embed session (${response.status})`);
  const session = await response.json();
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
  return session;
}

async function currentSession() {
  const stored = sessionStorage.getItem(STORAGE_KEY);
  return stored ? JSON.parse(stored) : newSession();
}

function render(context) {
  const group = context.user_group;
  $('group-name').textContent = group.name;
  $('group-id').textContent = group.provided_id;
  $('group-env').textContent = group.api_environment_tag;
  $('group-demo').hidden = !group.is_demo_group;
  const rows = Object.entries(context.variables).map(([name, value]) => {
    const row = document.createElement('tr');
    row.dataset.variable = name;
    for (const text of [name, typeof value === 'string' ? value : JSON.stringify(value)]) {
      const cell = document.createElement('td');
      cell.textContent = text; // data, never markup
      row.append(cell);
    }
    return row;
  });
  $('variables').tBodies[0].replaceChildren(...rows);
  $('group').hidden = false;
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
      setStatus('ok', `Viewing as ${body.user_group.name}`);
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

$('refresh').addEventListener('click', load);
$('renew').addEventListener('click', () => {
  sessionStorage.removeItem(STORAGE_KEY);
  load();
});
load();
