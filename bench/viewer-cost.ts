// `npx tsx bench/viewer-cost.ts [--rounds 7] [--requests 1000]`: what naming a viewer in an
// embed token costs (docs/api.md, "The viewer"), in this process, through the whole request
// (Fastify's inject, one request at a time, a fresh SQLite file): minting a token without a
// viewer and with one of 10 attributes, and GET /api/embed/context with each token (its
// verification remembered, as under load). The variants alternate round by round, so that a
// change in the machine's load touches each alike; the figure of each is its median round, in
// wall-clock time and in this process's CPU time (user and system), which a busy machine
// inflates less.
// The mint-* and embed-jws-* scenarios of `npm run bench` measure tokens without a viewer
// through HTTP; this isolates what the viewer adds.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { Keyring } from '../src/crypto/keyring.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { issueApiToken } from '../src/api-tokens/api-tokens.service.ts';
import { COMMAND_LINE_ACTOR } from '../src/audit/audit.repository.ts';

const { values: options } = parseArgs({ options: { rounds: { type: 'string', default: '7' }, requests: { type: 'string', default: '1000' } } });
const ROUNDS = Number(options.rounds);
const REQUESTS = Number(options.requests);

/** A viewer as a backend would name one: an id, an email, a name, a time zone and 10 attributes. */
const VIEWER = {
  id: 'user_8812',
  email: 'ada@example.com',
  name: 'Ada Lovelace',
  time_zone: 'Europe/London',
  attributes: {
    region: 'amer',
    country: 'US',
    team: 'sales-west',
    cost_center: 'cc-4410',
    manager_id: 'user_1002',
    max_discount: 0.15,
    seats_managed: 12,
    can_export: true,
    can_see_margins: false,
    language: 'en-US',
  },
};

const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-viewer-cost-'));
const config = { ...loadConfig({}), databaseUrl: `sqlite:${path.join(directory, 'bench.db')}`, rateLimitMax: 100_000_000, embedRateLimitMax: 100_000_000 };
const { handle } = await openMigratedDatabase(config);
const app = await buildApp({ config, database: handle, keyring: new Keyring([crypto.randomBytes(32)]), logger: false });
await app.ready();

try {
  const { token: apiToken } = await issueApiToken(
    handle,
    { accountSlug: 'bench', scopes: ['read', 'write'], allowedEnvironment: null, expiresAt: null, name: null },
    COMMAND_LINE_ACTOR,
    new Date(),
  );
  const call = async (method: 'GET' | 'POST', url: string, authorization: string, body?: unknown) => {
    const res = await app.inject({
      method,
      url,
      headers: { authorization, ...(body ? { 'content-type': 'application/json' } : {}) },
      payload: body ? JSON.stringify(body) : undefined,
    });
    if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
    return JSON.parse(res.body);
  };
  await call('POST', '/api/user', `Token ${apiToken}`, {
    user_group_id: 'bench-group',
    name: 'Bench Group',
    properties: { region: 'emea', plan: 'pro', seats: 42, currency: 'EUR', industry: 'retail' },
  });
  const mintBody = { user_group_id: 'bench-group' };
  const mintWithViewerBody = { user_group_id: 'bench-group', viewer: VIEWER };
  const plainToken: string = (await call('POST', '/api/embed_token', `Token ${apiToken}`, mintBody)).embed_token;
  const viewerToken: string = (await call('POST', '/api/embed_token', `Token ${apiToken}`, mintWithViewerBody)).embed_token;

  const variants = [
    { name: 'mint, no viewer', bytes: plainToken.length, run: () => call('POST', '/api/embed_token', `Token ${apiToken}`, mintBody) },
    {
      name: 'mint, viewer with 10 attributes',
      bytes: viewerToken.length,
      run: () => call('POST', '/api/embed_token', `Token ${apiToken}`, mintWithViewerBody),
    },
    { name: 'context, no viewer', bytes: plainToken.length, run: () => call('GET', '/api/embed/context', `Bearer ${plainToken}`) },
    { name: 'context, viewer with 10 attributes', bytes: viewerToken.length, run: () => call('GET', '/api/embed/context', `Bearer ${viewerToken}`) },
  ];
  const wall = new Map(variants.map((variant) => [variant.name, [] as number[]]));
  const cpu = new Map(variants.map((variant) => [variant.name, [] as number[]]));
  for (const variant of variants) for (let i = 0; i < REQUESTS / 5; i++) await variant.run(); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    for (const variant of variants) {
      const started = performance.now();
      const usage = process.cpuUsage();
      for (let i = 0; i < REQUESTS; i++) await variant.run();
      const used = process.cpuUsage(usage);
      wall.get(variant.name)!.push(((performance.now() - started) * 1000) / REQUESTS);
      cpu.get(variant.name)!.push((used.user + used.system) / REQUESTS);
    }
  }

  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1].toFixed(0);
  const range = (values: number[]) => `${Math.min(...values).toFixed(0)}-${Math.max(...values).toFixed(0)}`;
  const rows = [['variant', 'token B', 'wall µs', 'rounds', 'CPU µs', 'rounds']];
  for (const { name, bytes } of variants) {
    rows.push([name, String(bytes), median(wall.get(name)!), range(wall.get(name)!), median(cpu.get(name)!), range(cpu.get(name)!)]);
  }
  console.log(`${ROUNDS} rounds of ${REQUESTS} requests a variant, one at a time; medians of the rounds, µs a request`);
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  for (const row of rows) console.log(row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  '));
} finally {
  await app.close();
  await handle.close();
  fs.rmSync(directory, { recursive: true, force: true });
}
