// What every page the service serves (/docs, /console and their files) sends: its own
// Content-Security-Policy, and the headers for browsers that predate or ignore parts of it.
// frame-ancestors 'none' forbids framing in CSP; X-Frame-Options says the same to older
// browsers. No page leaks its URL to another site through the Referer header.
import type { FastifyReply } from 'fastify';

export function pageHeaders(reply: FastifyReply, contentSecurityPolicy: string): FastifyReply {
  return reply
    .header('content-security-policy', contentSecurityPolicy)
    .header('x-content-type-options', 'nosniff')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer');
}
