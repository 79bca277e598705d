// Part of `npm run generate:docs`: writes what the docs say of each operation that its
// declaration already says (docs/architecture.md, "Adding an operation"):
// - docs/api.md, "Scopes of the operations": the table of every route under /api with the token
//   or scope it needs and its environment rule, as its operation declares them
//   (auth/route-access.ts), between `<!-- operations: scopes -->` and `<!-- /operations -->`;
// - docs/client.md: a row for each method of @ugs/client that its tables lack, in the table of
//   its operation's tag, from the method's signature, the request it sends and the first
//   sentence of its doc comment; the row of a method that is gone is removed. Rows that exist
//   are written by hand (test/docs-client.test.ts holds their parameters to the signatures).
// test/docs-client.test.ts fails while either file is out of date.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DeclaredRoute } from '../src/auth/route-access.ts';
import { clientMethods, writtenParameters, type OpenApi } from './client-methods.ts';
import { describedApp } from './openapi-document.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The table of docs/client.md each tag of the OpenAPI document goes in: the bold line above it starts so. */
const CLIENT_TABLES: Record<string, string> = {
  'User groups': '**User groups**',
  Tags: '**Tags**',
  Embed: '**The embed side**',
  'API tokens': '**API tokens**',
  'Change events': '**Change events and webhooks**',
  Webhooks: '**Change events and webhooks**',
};

/**
 * docs/api.md, "Scopes of the operations": one row per route (a constrained variant shares its
 * route's row), in the order of the document's tags, then as the routes are registered.
 */
export function scopesTable(routes: readonly DeclaredRoute[], api: OpenApi): string {
  const tags = api.tags.map((tag) => tag.name);
  const tagOf = (route: DeclaredRoute) => api.paths[route.url.replace(/:(\w+)/g, '{$1}')]?.[route.method.toLowerCase()]?.tags?.[0] ?? '';
  const rank = (route: DeclaredRoute) => (tags.includes(tagOf(route)) ? tags.indexOf(tagOf(route)) : tags.length);
  const rows = routes
    .filter((route) => !route.constraints)
    .map((route, order) => ({ route, order }))
    .sort((a, b) => rank(a.route) - rank(b.route) || a.order - b.order)
    .map(({ route: { method, url, access } }) => {
      const scope = access.token === 'user_group' ? 'user group or embed token' : access.scope === null ? 'any API token' : `\`${access.scope}\``;
      const environment = access.token === 'user_group' ? 'its group' : `\`${access.environment}\``;
      return `| \`${method} ${url}\` | ${scope} | ${environment} |`;
    });
  return `\n| operation | scope | environment |\n|---|---|---|\n${rows.join('\n')}\n`;
}

const SCOPES = /(<!-- operations: scopes -->)[\s\S]*?(<!-- \/operations -->)/;

export function withScopesTable(text: string, routes: readonly DeclaredRoute[], api: OpenApi): string {
  if (!SCOPES.test(text)) throw new Error('docs/api.md has no <!-- operations: scopes --> … <!-- /operations --> in "Scopes of the operations"');
  return text.replace(SCOPES, (_, open: string, close: string) => `${open}${scopesTable(routes, api)}${close}`);
}

/** docs/client.md with a row for every method of the client, and none for a method that is gone. */
export function withClientRows(text: string, api: OpenApi): string {
  const methods = clientMethods(api);
  const lines = text.split('\n').filter((line) => {
    const name = /^\| `(\w+)\(/.exec(line)?.[1];
    return name === undefined || methods.has(name);
  });
  const documented = new Set(lines.map((line) => /^\| `(\w+)\(/.exec(line)?.[1]).filter(Boolean));
  const operations = Object.entries(api.paths).flatMap(([route, item]) =>
    Object.entries(item).map(([method, operation]) => ({ key: `${method.toUpperCase()} ${route}`, operation })),
  );
  for (const method of methods.values()) {
    if (documented.has(method.name)) continue;
    const operation = operations.find(({ key }) => key === method.request)?.operation;
    if (!operation) throw new Error(`docs/client.md has no row for ${method.name}, which sends no request of the OpenAPI document: write its row by hand`);
    const tag = operation.tags?.[0] ?? '';
    const heading = CLIENT_TABLES[tag];
    if (!heading)
      throw new Error(
        `docs/client.md has no table for the tag "${tag}" of ${method.name}: add one, and its line to CLIENT_TABLES (scripts/generate-operation-docs.ts)`,
      );
    const start = lines.findIndex((line) => line.startsWith(heading));
    if (start === -1) throw new Error(`docs/client.md has no line starting ${heading}`);
    let end = lines.findIndex((line, i) => i > start + 2 && !line.startsWith('|'));
    if (end === -1) end = lines.length;
    // After the row of the method the class declares before it, when that row is in this table.
    const earlier = [...methods.keys()].slice(0, [...methods.keys()].indexOf(method.name)).reverse();
    const previous = earlier.map((name) => lines.findIndex((line, i) => i > start && i < end && line.startsWith(`| \`${name}(`))).find((i) => i !== -1);
    if (previous !== undefined) end = previous + 1;
    lines.splice(end, 0, `| \`${method.name}(${writtenParameters(method.parameters)})\` | \`${method.request}\`: ${method.summary} |`);
  }
  return lines.join('\n');
}

/** Each file as the operations' declarations write it. */
export async function operationDocs(): Promise<Record<string, string>> {
  const { document, routes } = await describedApp();
  const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
  return {
    'docs/api.md': withScopesTable(read('docs/api.md'), routes, document as unknown as OpenApi),
    'docs/client.md': withClientRows(read('docs/client.md'), document as unknown as OpenApi),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const [file, text] of Object.entries(await operationDocs())) {
    if (fs.readFileSync(path.join(ROOT, file), 'utf8') === text) continue;
    fs.writeFileSync(path.join(ROOT, file), text);
    console.log(`written: ${file}`);
  }
}
