// Replies whose body was already written as JSON text from stored rows
// (user-groups.json.ts, embed-context.json.ts): Fastify sends a string as it is, so the
// content type must be set here rather than by a serializer.
import type { FastifyReply } from 'fastify';

export function sendJson(reply: FastifyReply, status: number, json: string): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(json);
}
