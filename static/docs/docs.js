// "Try" for get-or-create and delete: browsers cannot send a body with GET, and the page
// fills the body with an example. The API's own answer to that (docs/api.md, "Requests"):
// identify the group by query string, or POST with X-HTTP-Method-Override: GET. So a GET
// whose query string names the group drops the body, and one that identifies it by body alone
// goes out as that POST.
document.querySelector('rapi-doc').addEventListener('before-try', (event) => {
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

// RapiDoc titles every http scheme "HTTP Bearer" and labels every token field "api-token",
// so the two schemes looked alike. Each is titled instead by the token it takes (its
// bearerFormat in /openapi.json), and its field says what to paste there.
const reference = document.querySelector('rapi-doc');
const PLACEHOLDERS = { apiToken: 'ugs_api_…', userGroupOrEmbedToken: 'ugs_grp_… or an embed token' };
reference.addEventListener('spec-loaded', (event) => {
  for (const scheme of event.detail.securitySchemes ?? []) {
    if (scheme.bearerFormat) scheme.typeDisplay = scheme.bearerFormat[0].toUpperCase() + scheme.bearerFormat.slice(1);
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
});
