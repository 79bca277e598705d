// Pages are addressed by the URL's fragment (#/groups, #/group/Customer/acme-corp…), so the
// service serves one page and the back button works. A fragment never holds a token.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { page: 'groups'; params: URLSearchParams }
  | { page: 'new-group' }
  | { page: 'group'; environment: string; id: string; params: URLSearchParams }
  | { page: 'edit-group'; environment: string; id: string }
  | { page: 'tags' }
  | { page: 'tokens' }
  | { page: 'webhooks' }
  | { page: 'webhook'; id: number }
  | { page: 'keys' }
  | { page: 'not-found'; fragment: string };

/**
 * The page a fragment names; a fragment that names none, or is not valid percent-encoding, is
 * the not-found page. A fragment without a leading slash (`#main`, the skip link's) is an
 * anchor on the page, not a page: undefined.
 */
export function parseRoute(hash: string): Route | undefined {
  const fragment = hash.replace(/^#/, '');
  if (fragment !== '' && !fragment.startsWith('/')) return undefined;
  const [path, query = ''] = fragment.split('?');
  let parts: string[];
  try {
    parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    return { page: 'not-found', fragment }; // e.g. #/group/Customer/%E0%A4%A: a URIError
  }
  if (parts.length === 0 || (parts[0] === 'groups' && parts.length === 1)) return { page: 'groups', params: new URLSearchParams(query) };
  if (parts[0] === 'groups' && parts[1] === 'new' && parts.length === 2) return { page: 'new-group' };
  if (parts[0] === 'group' && parts.length === 3) return { page: 'group', environment: parts[1], id: parts[2], params: new URLSearchParams(query) };
  if (parts[0] === 'group' && parts.length === 4 && parts[3] === 'edit') return { page: 'edit-group', environment: parts[1], id: parts[2] };
  if (parts[0] === 'tags' && parts.length === 1) return { page: 'tags' };
  if (parts[0] === 'tokens' && parts.length === 1) return { page: 'tokens' };
  if (parts[0] === 'keys' && parts.length === 1) return { page: 'keys' };
  if (parts[0] === 'webhooks' && parts.length === 1) return { page: 'webhooks' };
  if (parts[0] === 'webhooks' && parts.length === 2 && /^[1-9][0-9]{0,15}$/.test(parts[1])) return { page: 'webhook', id: Number(parts[1]) };
  return { page: 'not-found', fragment };
}

export const groupHref = (environment: string, id: string, edit = false) =>
  `#/group/${encodeURIComponent(environment)}/${encodeURIComponent(id)}${edit ? '/edit' : ''}`;

export function navigate(href: string): void {
  location.hash = href.replace(/^#/, '');
}

export function useRoute(): Route {
  const [route, setRoute] = useState<Route>(() => parseRoute(location.hash) ?? { page: 'groups', params: new URLSearchParams() });
  useEffect(() => {
    // An in-page anchor (the skip link) moves focus and leaves the page as it is.
    const onChange = () => {
      const next = parseRoute(location.hash);
      if (next) setRoute(next);
    };
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
