// A webhook receiver for tests, and what the tests read from what it got (docs/api.md, "Webhooks").
import { GENEROUS_WAIT_MS } from './wait.ts';
import assert from 'node:assert/strict';
import { after } from 'node:test';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import type { SuiteApp } from './harness.ts';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * A webhook receiver on 127.0.0.1: records every request, answers `answer()` (200 unless told
 * otherwise), once it resolves when it returns a promise.
 */
export class Receiver {
  readonly received: Received[] = [];
  answer: (request: Received, index: number) => number | Promise<number> = () => 200;
  private server: http.Server | undefined;
  port = 0;

  async start(port = 0): Promise<this> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        const request = { headers: req.headers, body };
        this.received.push(request);
        void Promise.resolve(this.answer(request, this.received.length - 1)).then((status) => {
          res.statusCode = status;
          res.end('ok');
        });
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  /** Waits up to `ms` until `done()` holds. */
  async until(done: (received: Received[]) => boolean, ms = GENEROUS_WAIT_MS): Promise<Received[]> {
    const deadline = Date.now() + ms;
    while (!done(this.received)) {
      if (Date.now() > deadline) throw new Error(`the receiver got ${this.received.length} requests:\n${this.received.map((r) => r.body).join('\n')}`);
      await sleep(20);
    }
    return this.received;
  }
}

export function headersOf(request: Received): Record<string, string> {
  return {
    'webhook-id': String(request.headers['webhook-id']),
    'webhook-timestamp': String(request.headers['webhook-timestamp']),
    'webhook-signature': String(request.headers['webhook-signature']),
  };
}

/** The event, verified with the standardwebhooks package against `secret`. */
export function verified(secret: string, request: Received): { id: number; type: string; account: string; data: Record<string, unknown> } {
  return new Webhook(secret).verify(request.body, headersOf(request)) as never;
}

export const WEBHOOK_CONFIG = { webhookAllowPrivate: true, webhookRetryScheduleMs: Array(10).fill(100) };

/** An endpoint's deliveries once none is pending: an outcome is recorded a moment after the receiver got the request. */
export async function settledDeliveries(t: Pick<SuiteApp, 'request'>, token: string, endpointId: number) {
  const deadline = Date.now() + GENEROUS_WAIT_MS;
  for (;;) {
    const listing = await t.request('GET', `/api/webhook_endpoints/${endpointId}/deliveries`, { token });
    assert.equal(listing.status, 200, listing.text);
    if (!listing.body.deliveries.some((delivery) => delivery.status === 'pending') || Date.now() > deadline) return listing.body.deliveries;
    await sleep(20);
  }
}

export async function createEndpoint(t: Pick<SuiteApp, 'request'>, token: string, body: Record<string, unknown>) {
  const res = await t.request('POST', '/api/webhook_endpoints', { token, body });
  assert.equal(res.status, 201, res.text);
  return res.body.webhook_endpoint;
}

/** Receivers for the tests of one suite, each stopped after the suite (call it in the suite's body). */
export function useReceivers(): () => Promise<Receiver> {
  const receivers: Receiver[] = [];
  after(() => Promise.all(receivers.map((r) => r.stop())));
  return async () => {
    const r = await new Receiver().start();
    receivers.push(r);
    return r;
  };
}
