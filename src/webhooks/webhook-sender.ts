// One webhook request as the Standard Webhooks specification has it (docs/api.md, "Webhooks"):
// headers webhook-id, webhook-timestamp and webhook-signature (`v1,` + base64 of
// HMAC-SHA256(secret, "id.timestamp.body"), one per secret that signs, space-separated).
// The request goes to the address that was checked (webhook-address.ts), follows no
// redirect, reads at most a few KiB of the answer and gives up after 15 s.
import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { checkWebhookTarget, WebhookAddressError } from './webhook-address.ts';

export const WEBHOOK_SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32;
/** No answer within this is a failed attempt. */
export const WEBHOOK_TIMEOUT_MS = 15_000;
/** The most of an answer's body that is read (and then dropped). */
const MAX_RESPONSE_BYTES = 4096;

export function generateWebhookSecret(): string {
  return WEBHOOK_SECRET_PREFIX + crypto.randomBytes(SECRET_BYTES).toString('base64');
}

/** `v1,<base64 HMAC-SHA256>` of one message under one `whsec_` secret. */
export function signWebhook(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice(WEBHOOK_SECRET_PREFIX.length), 'base64');
  return `v1,${crypto.createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

export interface WebhookMessage {
  url: string;
  /** The same for every attempt of one delivery: receivers deduplicate on it. */
  id: string;
  body: string;
  /** The secrets that sign, the current one first. */
  secrets: string[];
  now: Date;
}

export interface AttemptOutcome {
  ok: boolean;
  /** Cut short by this instance's shutdown: not an attempt the receiver answered or failed; it goes again. */
  aborted?: boolean;
  statusCode: number | null;
  durationMs: number;
  /** Why it failed, for the deliveries listing; null when it succeeded. */
  error: string | null;
}

/** Sends one attempt; never throws: every failure is an outcome. */
export async function sendWebhook(
  message: WebhookMessage,
  options: {
    allowPrivate: boolean;
    timeoutMs?: number;
    signal?: AbortSignal;
    /**
     * The endpoint's own keep-alive agent (webhook-traffic.ts): a new connection per delivery
     * was a large share of each send (docs/performance.md, "Why the code is the way it is").
     * A kept connection goes to an address that was checked when it was opened; every
     * attempt still resolves and checks the host first, and refuses to send when it fails.
     */
    agent: (protocol: string) => http.Agent;
  },
): Promise<AttemptOutcome> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  let target: Awaited<ReturnType<typeof checkWebhookTarget>>;
  try {
    target = await checkWebhookTarget(message.url, options.allowPrivate);
  } catch (err) {
    return { ok: false, statusCode: null, durationMs: elapsed(), error: err instanceof WebhookAddressError ? err.message : String(err) };
  }
  const timestamp = Math.floor(message.now.getTime() / 1000);
  const signature = message.secrets.map((secret) => signWebhook(secret, message.id, timestamp, message.body)).join(' ');
  const payload = Buffer.from(message.body);
  // Connect to the checked address whatever the host resolves to by now; TLS still verifies the host name.
  const lookup: LookupFunction = (_hostname, opts, callback) => {
    if (opts.all)
      (callback as unknown as (err: null, addresses: { address: string; family: number }[]) => void)(null, [
        { address: target.address, family: target.family },
      ]);
    else callback(null, target.address, target.family);
  };
  const transport = target.url.protocol === 'https:' ? https : http;
  return new Promise<AttemptOutcome>((resolve) => {
    let settled = false;
    const finish = (outcome: Omit<AttemptOutcome, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...outcome, durationMs: elapsed() });
    };
    const request = transport.request(target.url, {
      method: 'POST',
      lookup,
      agent: options.agent(target.url.protocol),
      headers: {
        'content-type': 'application/json',
        'content-length': String(payload.length),
        'user-agent': 'user-group-service-webhooks',
        'webhook-id': message.id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signature,
      },
    });
    const timer = setTimeout(() => {
      finish({ ok: false, statusCode: null, error: `no answer within ${Math.round((options.timeoutMs ?? WEBHOOK_TIMEOUT_MS) / 1000)} s` });
      request.destroy();
    }, options.timeoutMs ?? WEBHOOK_TIMEOUT_MS);
    request.on('response', (response) => {
      const status = response.statusCode ?? 0;
      let read = 0;
      const done = () => {
        const ok = status >= 200 && status < 300;
        const error = ok ? null : status >= 300 && status < 400 ? `HTTP ${status} (redirects are not followed)` : `HTTP ${status}`;
        finish({ ok, statusCode: status, error });
      };
      response.on('data', (chunk: Buffer) => {
        read += chunk.length;
        if (read < MAX_RESPONSE_BYTES) return;
        // Enough read: the rest is not wanted, and the connection is not kept.
        done();
        response.destroy();
      });
      response.on('end', done);
      response.on('error', done);
      response.on('close', done);
    });
    request.on('error', (err: NodeJS.ErrnoException) => finish({ ok: false, statusCode: null, error: err.code ? `${err.code}: ${err.message}` : err.message }));
    // A shutdown does not wait for a slow receiver (up to the timeout): the delivery stays
    // pending, and this or another instance sends it again, with the same webhook-id.
    const abort = () => {
      finish({ ok: false, aborted: true, statusCode: null, error: 'cut short by a shutdown' });
      request.destroy();
    };
    if (options.signal?.aborted) abort();
    else options.signal?.addEventListener('abort', abort, { once: true });
    request.end(payload);
  });
}
