// JSON request bodies: one parser for every method, including GET, whose body Fastify never
// reads (get-or-create, GET /api/user, carries one: docs/api.md). Same limit, same media-type rule, same
// refusal of prototype-poisoning keys everywhere. Only the routes that take a body on GET or
// DELETE read one (readBodyOfAnyMethod); every other GET answers without waiting for a body.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { AppError } from '../errors.ts';
import { atEndOfTurn } from '../end-of-turn.ts';
import { findUnrepresentableNumber, type UnrepresentableNumber } from './json-numbers.ts';

export const BODY_LIMIT_BYTES = 256 * 1024;

function parseJsonText(text: string): unknown {
  if (text.trim() === '') return undefined;
  let body: unknown;
  try {
    body = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    const poisoned = /prototype/i.test((err as Error).message);
    throw new AppError('invalid_json', poisoned ? 'request body holds a forbidden key (__proto__ or constructor.prototype)' : 'request body is not valid JSON');
  }
  const unrepresentable = findUnrepresentableNumber(text);
  if (unrepresentable) throw numberRefused(unrepresentable);
  return body;
}

const NUMBER_RULES: Record<UnrepresentableNumber['issue'], string> = {
  number_too_large: 'is a number too large for a double (it would become Infinity)',
  number_too_small: 'is a non-zero number too small for a double (it would become 0)',
  integer_out_of_range: 'is an integer outside ±(2^53−1), which a double cannot hold exactly',
};

function numberRefused({ field, issue, literal }: UnrepresentableNumber): AppError {
  const shown = literal.length > 40 ? `${literal.slice(0, 20)}…(${literal.length} characters)` : literal;
  return new AppError('validation_failed', `${field} ${NUMBER_RULES[issue]}: ${shown}; send it as a string to keep it exactly`, {
    details: [{ field, issue }],
  });
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
}

/**
 * A route's preValidation hook that reads a JSON body whatever the method: for the routes that
 * take one on GET or DELETE, and for POST with X-HTTP-Method-Override: GET, which may come
 * without any body. Without a body, the body is `{}` (identification comes from the query).
 */
export function readBodyOfAnyMethod(request: FastifyRequest, _reply: unknown, done: (err?: Error) => void): void {
  if (request.body !== undefined) return done();
  if (!hasBody(request)) {
    request.body = {}; // no body: identification comes from the query string
    return done();
  }
  if (!isJsonMediaType(request.headers['content-type'])) {
    return done(new AppError('unsupported_media_type', 'a request body must be sent as Content-Type: application/json'));
  }
  const parse = (text: string) => {
    try {
      request.body = parseJsonText(text);
      done();
    } catch (err) {
      done(err as Error);
    }
  };
  // This hook usually runs while Node's HTTP parser is still inside the socket chunk that
  // brought the headers, and a small body nearly always came in that same chunk. Once the
  // I/O callbacks of this loop turn are done (a microtask would run between the parser's
  // header and body callbacks) the whole body sits in the stream's buffer, to be read at
  // once instead of through flowing mode, listeners and an 'end' event.
  atEndOfTurn(() => {
    if (!request.raw.complete) {
      readBody(request).then(parse, (err) => done(err));
      return;
    }
    let text: string;
    try {
      text = readBuffered(request);
    } catch (err) {
      return done(err as Error);
    }
    parse(text);
  });
}

function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  if (length !== undefined) return Number(length) > 0;
  return request.headers['transfer-encoding'] !== undefined;
}

function textOf(chunks: Buffer[]): string {
  return (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)).toString('utf8');
}

/** A body the parser has completely buffered (request.raw.complete), read in one go. */
function readBuffered(request: FastifyRequest): string {
  const chunks: Buffer[] = [];
  let size = 0;
  let chunk: Buffer | null;
  while ((chunk = request.raw.read() as Buffer | null) !== null) {
    size += chunk.length;
    if (size > BODY_LIMIT_BYTES) throw tooLarge();
    chunks.push(chunk);
  }
  return textOf(chunks);
}

/**
 * Reads the body with plain listeners: an async iterator over the stream costs a promise per
 * chunk and several listeners per request, on the hottest route. A body over the limit is
 * drained, not destroyed, so that the 413 still reaches the client.
 */
function readBody(request: FastifyRequest): Promise<string> {
  const declared = Number(request.headers['content-length'] ?? 0);
  if (declared > BODY_LIMIT_BYTES) return Promise.reject(tooLarge());
  const raw = request.raw;
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      raw.off('data', onData);
      raw.off('end', onEnd);
      raw.off('error', onError);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > BODY_LIMIT_BYTES) {
        stop();
        raw.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve(textOf(chunks));
    };
    const onError = (err: Error) => {
      stop();
      reject(err);
    };
    raw.on('data', onData);
    raw.on('end', onEnd);
    raw.on('error', onError);
  });
}

function tooLarge(): AppError {
  return new AppError('payload_too_large', `request body is larger than ${BODY_LIMIT_BYTES} bytes`);
}
