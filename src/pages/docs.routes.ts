// GET /docs: the API reference page, rendered by RapiDoc from GET /openapi.json, with this
// service's name and colours, the code samples of each operation, "Try" against this server,
// the rules of patterns in words (pattern-words.ts) and, on a phone, its own Contents button.
// Everything it loads comes from this server (no CDN: it works offline); the page's files are
// read once, at start; /docs/ leads to /docs. RapiDoc's bundle and its licenses are copied into
// static/docs/vendor/ by `npm run build` (scripts/build-docs-assets.mjs), so that the
// production install needs no RapiDoc package.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { AppError } from '../foundations/errors.ts';
import { pageHeaders } from './page-headers.ts';
import { PATTERN_WORDS } from './pattern-words.ts';

const PAGE_DIR = fileURLToPath(new URL('../../static/docs/', import.meta.url));

// The page runs only scripts of this origin and talks only to it; it may not be framed.
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  // RapiDoc's components write style attributes for its theme.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

interface Asset {
  body: Buffer;
  gzipped?: Buffer;
  type: string;
}

function readAssets(): Record<string, Asset> {
  const file = (name: string) => fs.readFileSync(`${PAGE_DIR}${name}`);
  const text = 'text/plain; charset=utf-8';
  return {
    'docs.css': { body: file('docs.css'), type: 'text/css; charset=utf-8' },
    'docs.js': { body: file('docs.js'), type: 'text/javascript; charset=utf-8' },
    'logo.svg': { body: file('logo.svg'), type: 'image/svg+xml' },
    'rapidoc-min.js': { body: file('vendor/rapidoc-min.js'), gzipped: file('vendor/rapidoc-min.js.gz'), type: 'text/javascript; charset=utf-8' },
    'rapidoc-min.js.LICENSE.txt': { body: file('vendor/rapidoc-min.js.LICENSE.txt'), type: text },
    'rapidoc-LICENSE.txt': { body: file('vendor/rapidoc-LICENSE.txt'), type: text },
  };
}

/**
 * The page with the words of each pattern in it, as data for docs.js (a JSON block is never
 * run, so the Content-Security-Policy has nothing to allow): there before RapiDoc renders.
 */
function readPage(): Buffer {
  const words = JSON.stringify(PATTERN_WORDS).replaceAll('<', '\\u003c');
  const html = fs.readFileSync(`${PAGE_DIR}index.html`, 'utf8');
  const marker = /<!-- pattern-words:[^>]*-->/;
  if (!marker.test(html)) throw new Error('static/docs/index.html has no <!-- pattern-words: … --> marker');
  return Buffer.from(html.replace(marker, () => `<script type="application/json" id="pattern-words">${words}</script>`));
}

export function registerDocsRoutes(app: FastifyInstance): void {
  const page = readPage();
  const assets = readAssets();
  const secure = (reply: FastifyReply) => pageHeaders(reply, CONTENT_SECURITY_POLICY);

  app.get('/docs', { schema: { hide: true } }, (_request, reply) =>
    secure(reply).type('text/html; charset=utf-8').header('cache-control', 'no-cache').send(page),
  );
  // One address for the page; a browser keeps the fragment (#put-/api/user) across the redirect.
  app.get('/docs/', { schema: { hide: true } }, (request, reply) => secure(reply).redirect(`/docs${request.url.slice('/docs/'.length)}`, 301));

  app.get<{ Params: { file: string } }>('/docs/assets/:file', { schema: { hide: true } }, (request, reply) => {
    const asset = Object.hasOwn(assets, request.params.file) ? assets[request.params.file] : undefined;
    if (!asset) throw new AppError('not_found', `no file ${request.params.file} in the reference page`);
    secure(reply).type(asset.type).header('cache-control', 'public, max-age=3600');
    if (asset.gzipped && /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''))) {
      return reply.header('content-encoding', 'gzip').header('vary', 'accept-encoding').send(asset.gzipped);
    }
    return reply.send(asset.body);
  });
}
