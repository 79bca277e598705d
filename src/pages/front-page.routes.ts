// GET /: where a person who types the service's address lands: its name and the two doors,
// the console (/console) and the API reference (/docs). A static page, read once at start: it
// says nothing of the deployment (no version, no account, no configuration). Its one inline
// style sheet is allowed by its hash, and nothing else: no script, no framing.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { pageHeaders } from './page-headers.ts';

const PAGE = fileURLToPath(new URL('../../static/front/index.html', import.meta.url));

/** The page's policy: its own style (by hash) and this origin's icon, nothing else. */
export function frontPagePolicy(html: string): string {
  const style = /<style>([\s\S]*?)<\/style>/.exec(html)?.[1];
  if (style === undefined) throw new Error('static/front/index.html has no <style>');
  const hash = crypto.createHash('sha256').update(style).digest('base64');
  return ["default-src 'none'", `style-src 'sha256-${hash}'`, "img-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"].join('; ');
}

export function registerFrontPageRoutes(app: FastifyInstance): void {
  const page = fs.readFileSync(PAGE, 'utf8');
  const policy = frontPagePolicy(page);
  app.get('/', { schema: { hide: true } }, (_request, reply) =>
    pageHeaders(reply, policy).type('text/html; charset=utf-8').header('cache-control', 'no-cache').send(page),
  );
}
