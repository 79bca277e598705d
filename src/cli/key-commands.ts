// `ugs keys status|reencrypt|reissue` and `ugs keys embed rotate|list`: the secret keys that
// seal stored secrets, and the keys that sign embed tokens (README, "Secret keys";
// docs/security.md).
import { type Command, InvalidArgumentError, Option } from 'commander';
import { EMBED_SIGNING_ALGORITHMS, loadConfig, type EmbedSigningAlgorithm } from '../config.ts';
import { COMMAND_LINE_ACTOR } from '../audit/actor.ts';
import { DEFAULT_ACTIVATION_SECONDS } from '../embed/signing-key-timing.ts';
import { configuredKeyring, duration, integerIn, jsonOption, print, UsageError, withDatabase } from './cli-parts.ts';

type JsonOption = { json?: boolean };

export function registerKeyCommands(program: Command): void {
  const keys = program
    .command('keys')
    .description('secret keys that protect stored user group tokens, webhook secrets and embed signing keys (UGS_SECRET_KEY, newest first)');
  keys.command('status').description('how many user group tokens are sealed under each key id').addOption(jsonOption()).action(keyStatus);
  keys
    .command('reencrypt')
    .description('re-seal every user group token, webhook secret and embed signing key under the newest key, in batches, while the server runs')
    .option('--batch-size <n>', 'rows per transaction (1-10000)', integerIn(1, 10_000, 'the batch size'), 500)
    .addOption(jsonOption())
    .action(reencrypt);
  keys
    .command('reissue')
    .description('for a key that is lost for good: give every group whose token it sealed a new token under the newest configured key')
    .argument('<key-id...>', 'the lost key ids (see: ugs keys status, or the message of a refused start)', (value: string, previous: string[] = []) => {
      if (!/^[0-9a-f]{8}$/.test(value)) throw new InvalidArgumentError('a key id is 8 hex digits');
      return [...previous, value];
    })
    .addOption(jsonOption())
    .action(reissueForLostKeys);
  registerEmbedKeyCommands(keys);
}

function registerEmbedKeyCommands(keys: Command): void {
  const embedKeys = keys.command('embed').description('the keys that sign embed tokens (published at /.well-known/jwks.json)');
  embedKeys
    .command('rotate')
    .description('add a new signing key: published at once, it signs after --activate-in; older keys stay published until their tokens expire')
    .addOption(
      new Option(
        '--alg <algorithm>',
        'the algorithm of the new key (default: UGS_EMBED_SIGNING_ALG, else ES256); keys of other algorithms stay published until their tokens expire',
      ).choices(EMBED_SIGNING_ALGORITHMS),
    )
    .addOption(
      new Option(
        '--activate-in <duration>',
        "how long the new key is published before it signs, so that verifiers' cached key sets learn it first; 0s: at once",
      )
        .argParser((value: string) => (/^0+\s*[smhdw]$/.test(value.trim()) ? 0 : duration(value)))
        .default(DEFAULT_ACTIVATION_SECONDS * 1000, `${DEFAULT_ACTIVATION_SECONDS / 60}m`),
    )
    .addOption(jsonOption())
    .action(rotateEmbedKey);
  embedKeys
    .command('list')
    .description('the signing keys: when each signs, and until when it stays published')
    .addOption(jsonOption())
    .action(async (opts: JsonOption) => {
      const { listSigningKeys } = await import('../embed/signing-keys.ts');
      const listed = await withDatabase((h) => listSigningKeys(h));
      const line = (k: (typeof listed)[number]) => [k.kid, k.algorithm, k.activates_at, k.retired_at ?? '-', k.signed_until].join('\t');
      print(opts, listed, ['kid\talgorithm\tactivates at\tretired at\tpublished until at least', ...listed.map(line)].join('\n'));
    });
}

async function keyStatus(opts: JsonOption): Promise<void> {
  const keyring = configuredKeyring();
  const { tokensPerKey } = await import('../crypto/reencrypt.ts');
  const rows = await withDatabase((h) => tokensPerKey(h.db));
  const state = (id: string) => (id === keyring.currentKeyId ? 'current' : keyring.keyIds.includes(id) ? 'old' : 'NOT CONFIGURED');
  const listed = rows.map((r) => ({ ...r, state: state(r.key_id) }));
  for (const id of keyring.keyIds) if (!rows.some((r) => r.key_id === id)) listed.push({ key_id: id, tokens: 0, state: state(id) });
  print(
    opts,
    { current_key_id: keyring.currentKeyId, keys: listed },
    ['key id\ttokens\tstate', ...listed.map((r) => `${r.key_id}\t${r.tokens}\t${r.state}`)].join('\n'),
  );
}

async function reencrypt(opts: JsonOption & { batchSize: number }): Promise<void> {
  const keyring = configuredKeyring();
  const { reencryptUserGroupTokens, reencryptWebhookSecrets } = await import('../crypto/reencrypt.ts');
  const { reencryptSigningKeys } = await import('../embed/signing-keys.ts');
  const [outcome, signing, webhookSecrets] = await withDatabase(
    async (h) =>
      [
        await reencryptUserGroupTokens(h, keyring, { batchSize: opts.batchSize }),
        await reencryptSigningKeys(h, keyring),
        await reencryptWebhookSecrets(h, keyring),
      ] as const,
  );
  const notConfigured = (what: string, ids: (string | number)[]) => (ids.length ? `${what} sealed under keys that are not configured: ${ids.join(', ')}` : '');
  print(
    opts,
    { current_key_id: keyring.currentKeyId, ...outcome, embed_signing_keys: signing, webhook_secrets: webhookSecrets },
    [
      `re-sealed ${outcome.resealed} of ${outcome.examined} user group tokens under key ${keyring.currentKeyId}`,
      `re-sealed ${signing.resealed} embed signing keys`,
      `re-sealed ${webhookSecrets.resealed} webhook endpoint secrets`,
      notConfigured('webhook endpoints whose secrets are', webhookSecrets.unreadable),
      notConfigured('embed signing keys', signing.unreadable),
      outcome.changedConcurrently
        ? `${outcome.changedConcurrently} were rotated meanwhile (already under the newest key of the rotating instance; run again to be sure)`
        : '',
      notConfigured(`${outcome.unreadable.length} are`, [...new Set(outcome.unreadable.map((u) => u.key_id))]),
    ]
      .filter(Boolean)
      .join('\n'),
  );
  if (outcome.unreadable.length + signing.unreadable.length + webhookSecrets.unreadable.length > 0) {
    throw new Error('some tokens or signing keys could not be re-sealed: add their keys to UGS_SECRET_KEY (after the newest) and run again');
  }
}

async function reissueForLostKeys(keyIds: string[], opts: JsonOption): Promise<void> {
  const keyring = configuredKeyring();
  for (const keyId of keyIds) {
    if (keyring.keyIds.includes(keyId))
      throw new UsageError(`key ${keyId} is configured, so its tokens can be read: move them with ugs keys reencrypt instead`);
  }
  const { reissueTokensOfLostKey } = await import('../user-groups/lost-key.service.ts');
  const { replaceSigningKeysOfLostKey } = await import('../embed/signing-keys.ts');
  const outcomes = await withDatabase(async (h) => {
    const done = [];
    for (const keyId of keyIds) {
      const reissued = await reissueTokensOfLostKey(h, keyring, keyId, COMMAND_LINE_ACTOR, () => new Date());
      const replaced = await replaceSigningKeysOfLostKey(h, keyring, keyId, new Date(), loadConfig().embedSigningAlgorithm);
      done.push({ ...reissued, replaced_signing_keys: replaced });
    }
    return done;
  });
  const report = (o: (typeof outcomes)[number]) =>
    `key ${o.key_id}: ${o.reissued} user group tokens reissued under key ${keyring.currentKeyId}; their old tokens no longer work` +
    (o.replaced_signing_keys.length > 0
      ? `\nembed signing keys ${o.replaced_signing_keys.join(', ')} replaced by a new key; their tokens verify until they expire`
      : '');
  print(opts, { current_key_id: keyring.currentKeyId, keys: outcomes }, outcomes.map(report).join('\n'));
}

async function rotateEmbedKey(opts: JsonOption & { alg?: EmbedSigningAlgorithm; activateIn: number }): Promise<void> {
  const keyring = configuredKeyring();
  const algorithm = opts.alg ?? loadConfig().embedSigningAlgorithm;
  const { rotateSigningKey } = await import('../embed/signing-keys.ts');
  const rotation = await withDatabase((h) => rotateSigningKey(h, keyring, new Date(), opts.activateIn, algorithm));
  print(
    opts,
    rotation,
    [
      `added embed signing key ${rotation.kid} (${rotation.algorithm}); it signs from ${rotation.activates_at}`,
      ...rotation.dropped.map((kid) => `dropped key ${kid}: every token it signed has expired`),
    ].join('\n'),
  );
}
