// GET /console: the web console, a page of this origin that calls the API with an API token
// pasted by its user (console/, built into console/dist by `npm run build`). Its files are
// read once, at start. A strict Content-Security-Policy: only this origin's script and style,
// no inline script, no framing; no CORS (docs/api.md, "The console").
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { AppError } from '../foundations/errors.ts';
import { pageHeaders } from './page-headers.ts';

const CONSOLE_DIR = fileURLToPath(new URL('../../console/dist/', import.meta.url));

export const CONSOLE_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = { 'console.js': 'text/javascript; charset=utf-8', 'console.css': 'text/css; charset=utf-8' };

function readConsole(): { page: Buffer; assets: Map<string, Buffer> } | undefined {
  try {
    const page = fs.readFileSync(`${CONSOLE_DIR}index.html`);
    return { page, assets: new Map(Object.keys(TYPES).map((name) => [name, fs.readFileSync(`${CONSOLE_DIR}assets/${name}`)])) };
  } catch {
    return undefined; // not built: answered below
  }
}

export function registerConsoleRoutes(app: FastifyInstance): void {
  const built = readConsole();
  const secure = (reply: FastifyReply) => pageHeaders(reply, CONSOLE_CONTENT_SECURITY_POLICY);

  const notBuilt = () => new AppError('unavailable', 'the console is not built: run npm run build', { headers: { 'retry-after': '60' } });

  const page = (_request: unknown, reply: FastifyReply) => {
    if (!built) throw notBuilt();
    return secure(reply).type('text/html; charset=utf-8').header('cache-control', 'no-cache').send(built.page);
  };
  app.get('/console', { schema: { hide: true } }, page);
  app.get('/console/', { schema: { hide: true } }, page);

  app.get<{ Params: { file: string } }>('/console/assets/:file', { schema: { hide: true } }, (request, reply) => {
    if (!built) throw notBuilt();
    const asset = built.assets.get(request.params.file);
    if (!asset) throw new AppError('not_found', `no file ${request.params.file} in the console`);
    return secure(reply).type(TYPES[request.params.file]).header('cache-control', 'no-cache').send(asset);
  });
}
