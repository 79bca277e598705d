// Which secret keys the stored user group tokens need. A token is sealed under one key, and
// its ciphertext starts with that key's id (keyring.ts); the server must not start with keys
// that cannot open what is stored, or every existing group would answer 500 (docs/deployment.md,
// "Secret keys"). Reading the ids is a loose index scan of user_groups_sealing_key
// (migration 0002): one probe per distinct key id, whatever the number of groups.
import { sql } from '../db/kysely.ts';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';
import type { Keyring } from './keyring.ts';

/** The id of the key that sealed a row's token (indexed: user_groups_sealing_key). */
export const sealingKeyId = sql<string>`substr(token_ciphertext, 1, 8)`;

/** Every key id that sealed a stored user group token, in order. */
async function sealingKeyIds(db: Kysely<Database>): Promise<string[]> {
  const ids: string[] = [];
  for (let after = ''; ; ) {
    const row = await db
      .selectFrom('user_groups')
      .select((eb) => eb.fn.min(sealingKeyId).as('key_id'))
      .where(sealingKeyId, '>', after)
      .executeTakeFirst();
    if (!row?.key_id) return ids;
    ids.push(row.key_id);
    after = row.key_id;
  }
}

/** The secret key ids that sealed embed signing keys which sign now or later (migration 0004). */
function signingKeySealers(db: Kysely<Database>, now: string): Promise<{ key_id: string; kid: string }[]> {
  return db
    .selectFrom('embed_signing_keys')
    .select([sql<string>`substr(private_key_sealed, 1, 8)`.as('key_id'), 'kid'])
    .where((eb) => eb.or([eb('retired_at', 'is', null), eb('retired_at', '>', now)]))
    .execute();
}

/** The secret key ids that sealed webhook endpoint secrets that still sign (the current one, and the previous one for 24 h after a rotation). */
async function webhookSecretSealers(db: Kysely<Database>, now: string): Promise<{ key_id: string; endpoint_id: number }[]> {
  const rows = await db.selectFrom('webhook_endpoints').select(['id', 'secret_sealed', 'previous_secret_sealed', 'previous_secret_expires_at']).execute();
  return rows.flatMap((row) => [
    { key_id: row.secret_sealed.slice(0, 8), endpoint_id: Number(row.id) },
    ...(row.previous_secret_sealed !== null && row.previous_secret_expires_at !== null && row.previous_secret_expires_at > now
      ? [{ key_id: row.previous_secret_sealed.slice(0, 8), endpoint_id: Number(row.id) }]
      : []),
  ]);
}

/**
 * The ids of the keys that sealed what is stored: user group tokens, embed signing keys that sign
 * now or later, webhook secrets that still sign. What a database that records no sealing key yet
 * (one an earlier version wrote) is known to be sealed under (known-keys.ts).
 */
export async function storedSealingKeyIds(db: Kysely<Database>, now: Date): Promise<string[]> {
  const ids = new Set(await sealingKeyIds(db));
  for (const { key_id: keyId } of await signingKeySealers(db, now.toISOString())) ids.add(keyId);
  for (const { key_id: keyId } of await webhookSecretSealers(db, now.toISOString())) ids.add(keyId);
  return [...ids].sort();
}

interface MissingKey {
  key_id: string;
  /** How many stored tokens it sealed. */
  tokens: number;
  /** The embed signing keys (kid) it sealed that sign now or later. */
  signing_keys: string[];
  /** The webhook endpoints (id) whose signing secret it sealed. */
  webhook_endpoints: number[];
}

/**
 * The key ids that sealed stored tokens, or embed signing keys that still sign, but are not in
 * the keyring, with what each sealed.
 */
export async function missingSealingKeys(db: Kysely<Database>, keyring: Keyring, now: Date): Promise<MissingKey[]> {
  const configured = new Set(keyring.keyIds);
  const missing = new Map<string, MissingKey>();
  const entry = (keyId: string) => missing.get(keyId) ?? missing.set(keyId, { key_id: keyId, tokens: 0, signing_keys: [], webhook_endpoints: [] }).get(keyId)!;
  for (const keyId of await sealingKeyIds(db)) {
    if (configured.has(keyId)) continue;
    const row = await db
      .selectFrom('user_groups')
      .select((eb) => eb.fn.countAll<number | string>().as('tokens'))
      .where(sealingKeyId, '=', keyId)
      .executeTakeFirstOrThrow();
    entry(keyId).tokens = Number(row.tokens);
  }
  for (const { key_id: keyId, kid } of await signingKeySealers(db, now.toISOString())) {
    if (!configured.has(keyId)) entry(keyId).signing_keys.push(kid);
  }
  for (const { key_id: keyId, endpoint_id: endpointId } of await webhookSecretSealers(db, now.toISOString())) {
    if (!configured.has(keyId) && !entry(keyId).webhook_endpoints.includes(endpointId)) entry(keyId).webhook_endpoints.push(endpointId);
  }
  return [...missing.values()].sort((a, b) => a.key_id.localeCompare(b.key_id));
}

/** Why the server will not start, and the ways out. */
export function missingKeysMessage(missing: MissingKey[], keyring: Keyring, keySource: string): string {
  const total = missing.reduce((sum, key) => sum + key.tokens, 0);
  const signing = missing.reduce((sum, key) => sum + key.signing_keys.length, 0);
  const webhooks = missing.reduce((sum, key) => sum + key.webhook_endpoints.length, 0);
  const what = [
    total > 0 ? `${total.toLocaleString('en-US')} stored user group tokens` : '',
    signing > 0 ? `${signing} embed signing key${signing === 1 ? '' : 's'}` : '',
    webhooks > 0 ? `the secrets of ${webhooks} webhook endpoint${webhooks === 1 ? '' : 's'}` : '',
  ]
    .filter(Boolean)
    .join(' and ');
  return [
    `refusing to start: ${what} ${total + signing + webhooks === 1 ? 'is' : 'are'} sealed under secret keys that are not configured:`,
    ...missing.map(
      (key) =>
        `  key id ${key.key_id}: ${key.tokens.toLocaleString('en-US')} tokens` +
        (key.signing_keys.length > 0 ? `, embed signing key${key.signing_keys.length === 1 ? '' : 's'} ${key.signing_keys.join(', ')}` : '') +
        (key.webhook_endpoints.length > 0 ? `, webhook endpoint${key.webhook_endpoints.length === 1 ? '' : 's'} ${key.webhook_endpoints.join(', ')}` : ''),
    ),
    `The configured keys (${keySource}): ${keyring.keyIds.join(', ')}.`,
    'Without the key that sealed them, those groups cannot be answered. Either:',
    `  - start with that key after the key that seals: UGS_SECRET_KEY="<key ${keyring.currentKeyId}>,<that key>"`,
    '    (then run: npx ugs keys reencrypt, which moves them to the key that seals; docs/security.md, "Secret keys"); or,',
    `  - if the key is lost for good: npx ugs keys reissue ${missing.map((key) => key.key_id).join(' ')}`,
    '    gives those groups new tokens under the configured key; their old tokens stop working, and your',
    '    backend fetches the new ones with a get-or-create (GET /api/user). A lost embed signing key is',
    '    replaced by a new one; the embed tokens it signed keep verifying until they expire. A webhook endpoint',
    '    whose secret is lost is deleted and created again (a new secret).',
  ].join('\n');
}
