// A reader of Server-Sent Events over a real socket (node:http), for the event stream's
// suites: each frame as it comes (events with their id, type and parsed data; comments).
import http from 'node:http';
import { after, before } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { ChangeEventJson } from '../../src/events/events.schemas.ts';
import { GENEROUS_WAIT_MS } from './wait.ts';

export interface SseEvent {
  id: string | undefined;
  event: string;
  data: ChangeEventJson;
}

export interface SseStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body of a refused request (not a stream). */
  text: string;
  events: SseEvent[];
  comments: string[];
  /** Resolves when the server ended the stream (or the connection closed). */
  ended: Promise<void>;
  /** Waits (up to timeoutMs) until `count` events have arrived; returns them all. */
  waitForEvents(count: number, timeoutMs?: number): Promise<SseEvent[]>;
  waitForComment(text: string, timeoutMs?: number): Promise<void>;
  close(): void;
}

/**
 * The suite's app (useTestApp) on a real socket from before the current describe's first test,
 * and the streams opened on it, each closed after its last test. `baseUrl()`: where it listens.
 */
export function useStreams(t: { app: FastifyInstance }): {
  baseUrl(): string;
  open(path: string, options?: { token?: string; lastEventId?: string }): Promise<SseStream>;
} {
  let baseUrl = '';
  const open: SseStream[] = [];
  before(async () => {
    baseUrl = await t.app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => {
    for (const stream of open) stream.close();
  });
  return {
    baseUrl: () => baseUrl,
    async open(path, options = {}) {
      const opened = await openSse(baseUrl, path, options);
      open.push(opened);
      return opened;
    },
  };
}

/** Opens `path` (with its query) as an SSE stream; resolves once the answer's headers (and, for a refusal, its body) are in. */
export function openSse(baseUrl: string, path: string, options: { token?: string; lastEventId?: string } = {}): Promise<SseStream> {
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  if (options.token) headers.authorization = `Token ${options.token}`;
  if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
  return new Promise((resolve, reject) => {
    const req = http.get(new URL(path, baseUrl), { headers, agent: false }, (res) => {
      const events: SseEvent[] = [];
      const comments: string[] = [];
      const waiters = new Set<() => void>();
      let buffer = '';
      let text = '';
      const notify = () => {
        for (const waiter of waiters) waiter();
      };
      const ended = new Promise<void>((resolveEnd) => {
        res.on('end', resolveEnd);
        res.on('close', resolveEnd);
        res.on('error', resolveEnd);
      });
      void ended.then(notify);
      let isEnded = false;
      void ended.then(() => (isEnded = true));
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (res.statusCode !== 200) {
          text += chunk;
          return;
        }
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields: Record<string, string> = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else {
              const colon = line.indexOf(':');
              fields[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, '');
            }
          }
          if (fields.data !== undefined) events.push({ id: fields.id, event: fields.event ?? 'message', data: JSON.parse(fields.data) });
        }
        notify();
      });
      const waitFor = (done: () => boolean, what: () => string, timeoutMs: number) =>
        new Promise<void>((resolveWait, rejectWait) => {
          const check = () => {
            if (done()) {
              cleanup();
              resolveWait();
            } else if (isEnded) {
              cleanup();
              rejectWait(new Error(`the stream ended before ${what()}`));
            }
          };
          const timer = setTimeout(() => {
            cleanup();
            rejectWait(new Error(`timed out waiting for ${what()}`));
          }, timeoutMs);
          const cleanup = () => {
            clearTimeout(timer);
            waiters.delete(check);
          };
          waiters.add(check);
          check();
        });
      const stream: SseStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        get text() {
          return text;
        },
        events,
        comments,
        ended,
        async waitForEvents(count, timeoutMs = GENEROUS_WAIT_MS) {
          await waitFor(
            () => events.filter((e) => e.event !== 'shutdown').length >= count,
            () => `${count} events (have ${JSON.stringify(events)})`,
            timeoutMs,
          );
          return events.filter((e) => e.event !== 'shutdown');
        },
        waitForComment(comment, timeoutMs = GENEROUS_WAIT_MS) {
          return waitFor(
            () => comments.includes(comment),
            () => `the comment "${comment}" (have ${JSON.stringify(comments)})`,
            timeoutMs,
          );
        },
        close() {
          req.destroy();
        },
      };
      if (res.statusCode === 200) resolve(stream);
      else res.on('end', () => resolve(stream));
    });
    req.on('error', reject);
  });
}
