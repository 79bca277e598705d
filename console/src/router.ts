// Pages are addressed by the URL's fragment (#/groups, #/group/Customer/acme-corp…), so the
// service serves one page and the back button works. A fragment never holds a token.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { page: 'groups'; params: URLSearchParams }
  | { page: 'new-group' }
  | { page: 'group'; environment: string; id: string }
  | { page: 'edit-group'; environment: string; id: string }
  | { page: 'tokens' }
  | { page: 'keys' };

export function parseRoute(hash: string): Route {
  const [path, query = ''] = hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'groups' && parts[1] === 'new') return { page: 'new-group' };
  if (parts[0] === 'group' && parts.length >= 3) {
    return parts[3] === 'edit' ? { page: 'edit-group', environment: parts[1], id: parts[2] } : { page: 'group', environment: parts[1], id: parts[2] };
  }
  if (parts[0] === 'tokens') return { page: 'tokens' };
  if (parts[0] === 'keys') return { page: 'keys' };
  return { page: 'groups', params: new URLSearchParams(query) };
}

export const groupHref = (environment: string, id: string, edit = false) =>
  `#/group/${encodeURIComponent(environment)}/${encodeURIComponent(id)}${edit ? '/edit' : ''}`;

export function navigate(href: string): void {
  location.hash = href.replace(/^#/, '');
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
