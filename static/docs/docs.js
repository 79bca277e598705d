const reference = document.querySelector('rapi-doc');

// "Try" for get-or-create and delete: browsers cannot send a body with GET, and the page
// fills the body with an example. The API's own answer to that (docs/api.md, "Requests"):
// identify the group by query string, or POST with X-HTTP-Method-Override: GET. So a GET
// whose query string names the group drops the body, and one that identifies it by body alone
// goes out as that POST.
reference.addEventListener('before-try', (event) => {
  const request = event.detail.request;
  if (request.method !== 'GET' || request.body === undefined) return;
  const identifiedByQuery = new URL(request.url, location.href).searchParams.size > 0;
  if (identifiedByQuery || !String(request.body).trim()) {
    delete request.body;
    return;
  }
  request.method = 'POST';
  request.headers.append('X-HTTP-Method-Override', 'GET');
});

// Words, not regular expressions: RapiDoc shows a field's pattern as it is ("Pattern:
// ^(?=[\s\S]*\S)[^\u0000-…]*$"). The page takes each pattern out of what it renders and says
// its rule in words after the field's description, unless the description says it already
// (the words: src/pages/pattern-words.ts, written into the page by the server). /openapi.json
// keeps the patterns.
const PATTERN_WORDS = JSON.parse(document.getElementById('pattern-words').textContent);
/** Puts the rule of `schema`'s pattern into `holder`'s description (the schema's own, or its parameter's). */
function inWords(holder, schema) {
  const rule = typeof schema.pattern === 'string' ? PATTERN_WORDS[schema.pattern] : undefined;
  if (!rule) return;
  const description = (holder.description ?? '').trim();
  if (!description.toLowerCase().includes(rule.saidBy.toLowerCase())) holder.description = description ? `${description} ${rule.words}` : rule.words;
  delete schema.pattern;
}
function patternsInWords(node, seen = new WeakSet()) {
  if (node === null || typeof node !== 'object' || seen.has(node)) return;
  seen.add(node);
  // A parameter shows its own description beside its schema's rules.
  if (node.in && node.schema) inWords(node, node.schema);
  inWords(node, node);
  for (const [key, value] of Object.entries(node)) if (key !== 'example' && key !== 'examples') patternsInWords(value, seen);
}
reference.addEventListener('before-render', (event) => patternsInWords(event.detail.spec));

// RapiDoc titles every http scheme "HTTP Bearer", every apiKey scheme by its type, and labels
// every token field "api-token", so the schemes looked alike. Each is titled instead by the
// token it takes (an http scheme's bearerFormat in /openapi.json; the apiKey scheme, whose value
// goes into the Authorization header as typed, says to type the word Token before the token),
// and its field says what to paste there.
const PLACEHOLDERS = { apiToken: 'Token ugs_api_…', apiTokenBearer: 'ugs_api_…', userGroupOrEmbedToken: 'ugs_grp_… or an embed token' };
const TITLES = { apiToken: 'API token (ugs_api_…), sent as Token <API token>' };
reference.addEventListener('spec-loaded', (event) => {
  for (const scheme of event.detail.securitySchemes ?? []) {
    const title = TITLES[scheme.securitySchemeId] ?? scheme.bearerFormat;
    if (title) scheme.typeDisplay = title[0].toUpperCase() + title.slice(1);
  }
  reference.requestUpdate();
});
// The fields are drawn (and drawn again) inside RapiDoc's shadow root whenever its
// authentication section is shown.
const labelTokenFields = () => {
  for (const input of reference.shadowRoot.querySelectorAll('input.api-key-input')) {
    const scheme = Object.keys(PLACEHOLDERS).find((id) => input.classList.contains(id));
    if (scheme && input.placeholder !== PLACEHOLDERS[scheme]) {
      input.placeholder = PLACEHOLDERS[scheme];
      input.setAttribute('aria-label', PLACEHOLDERS[scheme]);
      input.style.width = '20em';
    }
  }
};
customElements.whenDefined('rapi-doc').then(() => {
  new MutationObserver(labelTokenFields).observe(reference.shadowRoot, { childList: true, subtree: true });
  labelTokenFields();
  // RapiDoc pulls the line under the title (License: MIT) 15 px left of everything else, for
  // separators that the first item of the line does not have: at the screen's edge on a phone.
  const fixes = new CSSStyleSheet();
  fixes.replaceSync('#api-info { margin-left: 0; }');
  reference.shadowRoot.adoptedStyleSheets = [...reference.shadowRoot.adoptedStyleSheets, fixes];
});

// A phone: RapiDoc has no navigation below 768 px, so "Contents" in the page's bar opens
// RapiDoc's own (its filter, the authentication, every operation) over the reference
// (docs.css). Picking an entry closes it; so do Escape and the button.
const contents = document.getElementById('contents-button');
const contentsOpen = () => reference.classList.contains('contents-open');
const showContents = (open) => {
  reference.classList.toggle('contents-open', open);
  contents.setAttribute('aria-expanded', String(open));
  contents.textContent = open ? 'Close' : 'Contents';
  if (open) reference.shadowRoot.querySelector('.nav-scroll [tabindex="0"]')?.focus();
};
contents.addEventListener('click', () => showContents(!contentsOpen()));
// RapiDoc stops its navigation's clicks from bubbling; the capture phase still sees them.
const picked = (event) => event.composedPath().some((node) => node.dataset?.action === 'navigate');
window.addEventListener('click', (event) => contentsOpen() && picked(event) && showContents(false), true);
window.addEventListener('keyup', (event) => contentsOpen() && event.key === 'Enter' && picked(event) && showContents(false), true);
window.addEventListener('keydown', (event) => {
  if (event.key !== 'Escape' || !contentsOpen()) return;
  showContents(false);
  contents.focus();
});
