// A database filled through the API the way a user fills it over months, and the answers it
// gives, for the upgrade suites: what the previous release wrote must read the same after an
// upgrade (and after a rollback), and every token it issued must still work.
import assert from 'node:assert/strict';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { httpRequest, type CommandResult } from './processes.ts';
import type { Receiver } from './webhook-receiver.ts';
import { openDatabase } from '../../src/db/database.ts';
import { recordedChanges } from '../../src/db/schema-changes.ts';
import { eventually } from './wait.ts';

export const PUBLIC_URL = 'https://ugs.example.com';

/** One request whose answer the upgrade must keep. */
export interface Read {
  what: string;
  method: string;
  path: string;
  token?: string;
  /** Sent as `Authorization: Bearer` (a user group token) instead of `Token`. */
  bearer?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface Filled {
  reads: Read[];
  /** Every embed token issued, with the group it names: each must still verify against the JWKS. */
  embedTokens: string[];
}

type Ugs = (args: string[]) => Promise<CommandResult>;

/**
 * Fills the database of the server at `baseUrl` through its API (and its `ugs`, as an operator
 * does): groups with a hierarchy, declared levels, tags and a tag set; renames, a rotation with a
 * grace period, a delete, an upsert; API tokens over HTTP and by `ugs`, one revoked; embed
 * tokens; a second signing key; a webhook endpoint and its deliveries; an idempotency key.
 */
export async function fillThroughTheApi(baseUrl: string, ugs: Ugs, receiver: Receiver): Promise<Filled> {
  const cli = async (args: string[]) => {
    const run = await ugs(args);
    assert.equal(run.code, 0, `ugs ${args.join(' ')}: ${run.stderr}`);
    return run.stdout;
  };
  const admin = JSON.parse(await cli(['token', 'create', '--account', 'acme', '--scopes', 'read,write,admin', '--name', 'admin', '--json'])).token as string;
  await cli(['account', 'levels', 'acme', 'Company,Team,User']);
  const call = async (method: string, path: string, body?: unknown, extra: { token?: string; headers?: Record<string, string> } = {}) => {
    const answer = await httpRequest(baseUrl, method, path, { token: extra.token ?? admin, body, headers: extra.headers });
    assert.ok(answer.status < 300, `${method} ${path}: ${answer.status} ${answer.text}`);
    // biome-ignore lint/suspicious/noExplicitAny: the answers of many operations, read at fields this file names
    return answer.body as Record<string, any>;
  };

  const endpoint = (await call('POST', '/api/webhook_endpoints', { url: receiver.url, description: 'every event' })).webhook_endpoint;
  const groups: Record<string, string> = {};
  const create = async (body: Record<string, unknown>) => {
    const created = await call('POST', '/api/user', body);
    groups[String(body.user_group_id)] = created.user_group.token;
  };
  await create({
    user_group_id: 'globex',
    name: 'Globex',
    hierarchy_level: 'Company',
    group_tags: ['enterprise', 'emea'],
    properties: { plan: 'pro', region: 'emea' },
    mapping: { database: 'globex_db' },
  });
  await create({ user_group_id: 'globex:sales', parent_user_group_id: 'globex', hierarchy_level: 'Team', properties: { region: 'us' } });
  await create({ user_group_id: 'globex:sales:jane', parent_user_group_id: 'globex:sales', hierarchy_level: 'User', group_tags: ['beta'] });
  await create({ user_group_id: 'initech', name: 'Initech', properties: { plan: 'trial' }, is_demo_group: true });
  await create({ user_group_id: 'sandbox', api_environment_tag: 'Testing', group_tags: ['qa'] });
  await create({ user_group_id: 'temporary' });
  await call('PUT', '/api/user', { user_group_id: 'initech', new_user_group_id: 'initech-corp', name: 'Initech Corp', properties: { plan: 'pro' } });
  groups['initech-corp'] = groups.initech;
  delete groups.initech;
  await call('DELETE', '/api/user?user_group_id=temporary');
  delete groups.temporary;
  const oldSalesToken = groups['globex:sales'];
  groups['globex:sales'] = (await call('POST', '/api/user', { current_token: oldSalesToken, grace_period_seconds: 86_400 })).user_group.token;
  const upserted = await call('POST', '/api/users/upsert', {
    user_groups: [
      { user_group_id: 'bulk-1', parent_user_group_id: 'globex', hierarchy_level: 'Team' },
      { user_group_id: 'bulk-2', group_tags: ['imported'] },
    ],
  });
  assert.equal(upserted.results.length, 2);
  await call('POST', '/api/group_tags', { name: 'unused' });
  await call('POST', '/api/group_tags/rename', { name: 'emea', new_name: 'europe' });
  const idempotent = { method: 'POST', path: '/api/user', body: { user_group_id: 'hooli', name: 'Hooli' }, headers: { 'idempotency-key': 'create-hooli-1' } };
  groups.hooli = (await call(idempotent.method, idempotent.path, idempotent.body, { headers: idempotent.headers })).user_group.token;

  const reader = (await call('POST', '/api/api_tokens', { name: 'reader', scopes: ['read'], default_environment: 'Testing' })).token as string;
  const revoked = await call('POST', '/api/api_tokens', { name: 'revoked', scopes: ['read'] });
  await call('DELETE', `/api/api_tokens/${revoked.api_token.id}`);
  const cliToken = JSON.parse(await cli(['token', 'create', '--account', 'acme', '--scopes', 'read', '--env', 'Customer', '--name', 'ops', '--json']))
    .token as string;

  const embedTokens = [
    (await call('POST', '/api/embed_token', { user_group_id: 'globex:sales:jane', viewer: { id: 'jane@globex.example', attributes: { team: 'sales' } } }))
      .embed_token,
  ];
  const jwksKeys = async () => ((await httpRequest(baseUrl, 'GET', '/.well-known/jwks.json')).body as unknown as { keys: unknown[] }).keys.length;
  const keysBefore = await jwksKeys();
  await cli(['keys', 'embed', 'rotate']);
  embedTokens.push((await call('POST', '/api/embed_token', { user_group_id: 'globex' })).embed_token);
  await call('POST', `/api/webhook_endpoints/${endpoint.id}/test`);

  // Every event since the endpoint was created delivered and recorded before anything is read.
  const events = (await call('GET', '/api/events?limit=500')).events as { id: number }[];
  const last = events.at(-1)!.id;
  await receiver.until((received) => received.some((r) => JSON.parse(r.body).id === last) && received.some((r) => JSON.parse(r.body).id === 0));
  await eventually('every delivery recorded as delivered', async () => {
    const deliveries = (await call('GET', `/api/webhook_endpoints/${endpoint.id}/deliveries?limit=100`)).deliveries as { status: string }[];
    return deliveries.length > 0 && deliveries.every((delivery) => delivery.status === 'delivered');
  });
  // An instance re-reads the signing keys once a second (docs/api.md, "Embed tokens"): the key
  // `ugs keys embed rotate` added is in its JWKS after that: waited for, not slept for.
  await eventually('the key ugs keys embed rotate added, in the JWKS', async () => (await jwksKeys()) > keysBefore);

  const reads: Read[] = [];
  for (const [id, token] of Object.entries(groups)) {
    const env = id === 'sandbox' ? '&api_environment_tag=Testing' : '';
    reads.push({ what: `get-or-create ${id}`, method: 'GET', path: `/api/user?user_group_id=${encodeURIComponent(id)}${env}`, token: admin });
    reads.push({ what: `history of ${id}`, method: 'GET', path: `/api/user/history?user_group_id=${encodeURIComponent(id)}${env}`, token: admin });
    reads.push({ what: `embed context of ${id}`, method: 'GET', path: '/api/embed/context', bearer: token });
    reads.push({ what: `introspection of ${id}'s token`, method: 'POST', path: '/api/embed/introspect', token: admin, body: { token } });
  }
  reads.push(
    { what: 'the rotated token, in its grace period', method: 'GET', path: '/api/embed/context', bearer: oldSalesToken },
    { what: 'history of a deleted group', method: 'GET', path: '/api/user/history?user_group_id=temporary', token: admin },
    { what: 'the list', method: 'GET', path: '/api/users?limit=100', token: admin },
    { what: 'the list in Testing', method: 'GET', path: '/api/users?api_environment_tag=Testing', token: admin },
    { what: 'the list by tag', method: 'GET', path: '/api/users?tag=beta', token: admin },
    { what: 'the list by parent', method: 'GET', path: '/api/users?parent_user_group_id=globex', token: admin },
    { what: 'the list by prefix', method: 'GET', path: '/api/users?q=glo', token: admin },
    { what: 'the tag set', method: 'GET', path: '/api/group_tags', token: admin },
    { what: 'the API tokens', method: 'GET', path: '/api/api_tokens', token: admin },
    { what: "the API tokens' history", method: 'GET', path: '/api/api_tokens/history', token: admin },
    { what: 'the admin token', method: 'GET', path: '/api/api_tokens/current', token: admin },
    { what: 'the reader token', method: 'GET', path: '/api/api_tokens/current', token: reader },
    { what: "ugs's token", method: 'GET', path: '/api/api_tokens/current', token: cliToken },
    { what: 'the revoked token', method: 'GET', path: '/api/api_tokens/current', token: revoked.token },
    { what: 'the feed', method: 'GET', path: '/api/events?limit=500', token: admin },
    { what: 'the feed in Testing', method: 'GET', path: '/api/events?limit=500', token: reader },
    { what: 'the webhook endpoints', method: 'GET', path: '/api/webhook_endpoints', token: admin },
    { what: 'the deliveries', method: 'GET', path: `/api/webhook_endpoints/${endpoint.id}/deliveries?limit=100`, token: admin },
    { what: 'the JWKS', method: 'GET', path: '/.well-known/jwks.json' },
    { what: 'the discovery document', method: 'GET', path: '/.well-known/openid-configuration' },
    { what: 'an idempotent retry', ...idempotent, token: admin },
    ...embedTokens.map((token, i) => ({
      what: `introspection of embed token ${i}`,
      method: 'POST',
      path: '/api/embed/introspect',
      token: admin,
      body: { token },
    })),
  );
  return { reads, embedTokens };
}

/** Fields that differ between two reads of the same data: the request's own id, and when a token was last used (every read uses one). */
const VOLATILE = new Set(['request_id', 'last_used_at']);

/**
 * Changes this release makes on purpose to answers that existed before, each documented in
 * CHANGELOG.md: `[what, (answer) => the answer with that field as the previous release gave it]`.
 * The compared answers go through each before they are compared.
 */
const DELIBERATE_CHANGES: [string, (read: Read, body: unknown) => unknown][] = [];

function withoutVolatile(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutVolatile);
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).flatMap(([key, inner]) => (VOLATILE.has(key) ? [] : [[key, withoutVolatile(inner)]])));
  return value;
}

export interface Answer {
  status: number;
  body: unknown;
  replayed?: string;
}

/** The answers of `reads` from the server at `baseUrl`, by what each is. */
export async function answersOf(baseUrl: string, reads: Read[]): Promise<Record<string, Answer>> {
  const answers: Record<string, Answer> = {};
  for (const read of reads) {
    const headers = { ...read.headers, ...(read.bearer ? { authorization: `Bearer ${read.bearer}` } : {}) };
    const answer = await httpRequest(baseUrl, read.method, read.path, { token: read.token, body: read.body, headers });
    let body = withoutVolatile(answer.body);
    for (const [, undo] of DELIBERATE_CHANGES) body = undo(read, body);
    answers[read.what] = {
      status: answer.status,
      body,
      ...(answer.headers['idempotent-replayed'] ? { replayed: String(answer.headers['idempotent-replayed']) } : {}),
    };
  }
  return answers;
}

/** Each embed token still verifies (signature, issuer) against the JWKS that `baseUrl` publishes now. */
export async function embedTokensVerify(baseUrl: string, tokens: string[]): Promise<void> {
  const jwks = createLocalJWKSet((await httpRequest(baseUrl, 'GET', '/.well-known/jwks.json')).body as never);
  for (const token of tokens) await jwtVerify(token, jwks, { issuer: PUBLIC_URL });
}

/** The expand changes recorded in the database at `url`. */
export async function recordedExpandChanges(url: string): Promise<string[]> {
  const handle = openDatabase(url);
  try {
    return (await recordedChanges(handle.db)).filter((change) => change.kind === 'expand').map((change) => change.name);
  } finally {
    await handle.close();
  }
}
