// Replies whose body was already written as JSON text from stored rows
// (user-groups.json.ts, embed-context.json.ts): Fastify sends a string as it is, so the
// content type must be set here rather than by a serializer. A Buffer (a page the database
// wrote as a blob, written-page.ts) goes out as it is too.
import type { FastifyReply } from 'fastify';

export function sendJson(reply: FastifyReply, status: number, json: string | Buffer): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(json);
}
