// JSON request bodies: one parser for every method, including GET, whose body Fastify never
// reads (get-or-create, GET /api/user, carries one: docs/api.md). Same limit, same media-type rule, same
// refusal of prototype-poisoning keys everywhere. Only the routes that take a body on GET or
// DELETE read one (readBodyOfAnyMethod); every other GET answers without waiting for a body.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import secureJson from 'secure-json-parse';
import { AppError } from '../foundations/errors.ts';
import { atEndOfTurn } from '../foundations/end-of-turn.ts';
import { findUnrepresentableNumbers, numberRefused, type UnrepresentableNumber } from './json-numbers.ts';

export const BODY_LIMIT_BYTES = 256 * 1024;

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The body's array of items that succeed or fail one by one (the bulk upsert's
     * `user_groups`): a number a double cannot hold inside one of them fails that item
     * (itemNumberFailure), not the whole request.
     */
    jsonItems?: string;
  }
}

/** Items of a body whose number a double cannot hold, with the error a single call would get for it. */
const numberFailures = new WeakMap<object, AppError>();

/** The error of an item of a route's `jsonItems` that holds a number a double cannot hold; undefined for any other. */
export function itemNumberFailure(item: unknown): AppError | undefined {
  return typeof item === 'object' && item !== null ? numberFailures.get(item) : undefined;
}

/** `itemsField`: asked only when the body holds such a number (a route's options cost an object to read). */
function parseJsonText(text: string, itemsField?: () => string | undefined): unknown {
  if (text.trim() === '') return undefined;
  let body: unknown;
  try {
    body = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    const poisoned = /prototype/i.test((err as Error).message);
    throw new AppError('invalid_json', poisoned ? 'request body holds a forbidden key (__proto__ or constructor.prototype)' : 'request body is not valid JSON');
  }
  const unrepresentable = findUnrepresentableNumbers(text);
  if (unrepresentable.length === 0) return body;
  const field = itemsField?.();
  if (!(field && failItems(body, field, unrepresentable))) throw numberRefused(unrepresentable[0]);
  return body;
}

/**
 * Marks each item of `body[itemsField]` that holds one of `numbers` as failed, with its first
 * one named from the item (`properties.big`), as a single call names it. False, marking
 * nothing, when one of them is anywhere else: then the whole body is refused.
 */
function failItems(body: unknown, itemsField: string, numbers: readonly UnrepresentableNumber[]): boolean {
  const items = (body as Record<string, unknown>)?.[itemsField];
  if (!Array.isArray(items)) return false;
  const inItem = (n: UnrepresentableNumber) => n.path[0] === itemsField && n.path.length > 2 && typeof items[n.path[1] as number] === 'object';
  if (!numbers.every(inItem)) return false;
  for (const number of numbers) {
    const item = items[number.path[1] as number] as object;
    if (!numberFailures.has(item)) numberFailures.set(item, numberRefused({ ...number, field: number.path.slice(2).join('.') }));
  }
  return true;
}

function isJsonMediaType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const essence = contentType.split(';')[0].trim().toLowerCase();
  return essence === 'application/json';
}

export function registerJsonBodyParsing(app: FastifyInstance): void {
  // Only JSON: text/plain and every other media type get 415 instead of a string body.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: BODY_LIMIT_BYTES }, (request, text, done) => {
    try {
      done(
        null,
        parseJsonText(text as string, () => request.routeOptions.config.jsonItems),
      );
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
