// JSON request bodies: one parser for every method, including GET, whose body Fastify never
// reads (the seed's get-or-create carries one). Same limit, same media-type rule, same
// refusal of prototype-poisoning keys everywhere.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { AppError } from '../errors.ts';

export const BODY_LIMIT_BYTES = 256 * 1024;

export function parseJsonText(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    const poisoned = /prototype/i.test((err as Error).message);
    throw new AppError(
      'invalid_json',
      poisoned ? 'request body holds a forbidden key (__proto__ or constructor.prototype)' : 'request body is not valid JSON',
    );
  }
}

function isJsonMediaType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const essence = contentType.split(';')[0].trim().toLowerCase();
  return essence === 'application/json';
}

export function registerJsonBodyParsing(app: FastifyInstance): void {
  // Only JSON: text/plain and every other media type get 415 instead of a string body.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: BODY_LIMIT_BYTES }, (_req, text, done) => {
    try {
      done(null, parseJsonText(text as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  app.addHook('preValidation', (request, _reply, done) => {
    if (request.method !== 'GET' && request.method !== 'DELETE' && !isGetOverride(request)) return done();
    if (request.body !== undefined) return done();
    if (!hasBody(request)) {
      request.body = {}; // no body: identification comes from the query string
      return done();
    }
    if (!isJsonMediaType(request.headers['content-type'])) {
      return done(new AppError('unsupported_media_type', 'a request body must be sent as Content-Type: application/json'));
    }
    readBody(request).then(
      (text) => {
        try {
          request.body = parseJsonText(text);
          done();
        } catch (err) {
          done(err as Error);
        }
      },
      (err) => done(err),
    );
  });

}

/** POST with X-HTTP-Method-Override: GET is a GET: it may identify the group by query string alone. */
function isGetOverride(request: FastifyRequest): boolean {
  const override = request.headers['x-http-method-override'];
  return request.method === 'POST' && typeof override === 'string' && override.toUpperCase() === 'GET';
}

function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  if (length !== undefined) return Number(length) > 0;
  return request.headers['transfer-encoding'] !== undefined;
}

async function readBody(request: FastifyRequest): Promise<string> {
  const declared = Number(request.headers['content-length'] ?? 0);
  if (declared > BODY_LIMIT_BYTES) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request.raw) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    size += buffer.length;
    if (size > BODY_LIMIT_BYTES) throw tooLarge();
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function tooLarge(): AppError {
  return new AppError('payload_too_large', `request body is larger than ${BODY_LIMIT_BYTES} bytes`);
}
