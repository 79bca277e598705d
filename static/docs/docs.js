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
