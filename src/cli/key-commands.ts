// `ugs keys status|introduce|reencrypt|reissue` and `ugs keys embed rotate|list`: the secret
// keys that seal stored secrets, the one the database seals under, and the keys that sign embed
// tokens (docs/security.md, "Secret keys"; docs/deployment.md, "Secret keys").
import { type Command, InvalidArgumentError, Option } from 'commander';
import { EMBED_SIGNING_ALGORITHMS, loadConfig, type EmbedSigningAlgorithm } from '../config.ts';
import { COMMAND_LINE_ACTOR } from '../audit/actor.ts';
import type { Keyring } from '../crypto/keyring.ts';
import { DEFAULT_ACTIVATION_SECONDS } from '../embed/signing-key-timing.ts';
import { duration, integerIn, jsonOption, print, UsageError, withDatabase, withDatabaseKeys } from './cli-parts.ts';

type JsonOption = { json?: boolean };

export function registerKeyCommands(program: Command): void {
  const keys = program
    .command('keys')
    .description('secret keys that protect stored user group tokens, webhook secrets and embed signing keys (UGS_SECRET_KEY, the one that seals first)');
  keys
    .command('status')
    .description('how many user group tokens are sealed under each key id, and which key the database seals under')
    .addOption(jsonOption())
    .action(keyStatus);
  keys
    .command('introduce')
    .description(
      'make the first configured key this database\'s sealing key, the one every process must then seal under; the keys after it must open what is stored (docs/security.md, "Secret keys")',
    )
    .addOption(jsonOption())
    .action(introduceKey);
  keys
    .command('reencrypt')
    .description(
      "re-seal every user group token, webhook secret and embed signing key under the key that seals (the first configured, the database's), in batches, while the server runs",
    )
    .option('--batch-size <n>', 'rows per transaction (1-10000)', integerIn(1, 10_000, 'the batch size'), 500)
    .addOption(jsonOption())
    .action(reencrypt);
  keys
    .command('reissue')
    .description(
      "for a key that is lost for good: give every group whose token it sealed a new token under the first configured key (which becomes the database's key if the lost one was)",
    )
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

/** The configured keys as they are, before the database has its say; a usage error when there are none. */
async function configuredKeyring(): Promise<Keyring> {
  const { configuredKeys, noKeyReason } = await import('../process/runtime.ts');
  const config = loadConfig();
  try {
    return configuredKeys(config, {}, () => `no secret key is configured (${noKeyReason(config)})`).keyring;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

async function keyStatus(opts: JsonOption): Promise<void> {
  const keyring = await configuredKeyring();
  const { tokensPerKey } = await import('../crypto/reencrypt.ts');
  const { databaseKeys, sealingKeyProblem } = await import('../crypto/known-keys.ts');
  const [rows, known] = await withDatabase(async (h) => [await tokensPerKey(h.db), await databaseKeys(h.db)] as const);
  const state = (id: string) => (id === keyring.currentKeyId ? 'current' : keyring.keyIds.includes(id) ? 'old' : 'NOT CONFIGURED');
  const listed = rows.map((r) => ({ ...r, state: state(r.key_id) }));
  for (const id of keyring.keyIds) if (!rows.some((r) => r.key_id === id)) listed.push({ key_id: id, tokens: 0, state: state(id) });
  const refusal = sealingKeyProblem(known, keyring, 'configured now');
  print(
    opts,
    { current_key_id: keyring.currentKeyId, keys: listed, database_sealing_key_id: known.sealing, database_keys: known.known },
    [
      'key id\ttokens\tstate',
      ...listed.map((r) => `${r.key_id}\t${r.tokens}\t${r.state}`),
      known.sealing === null
        ? 'this database has not been introduced to a key yet: the first process that opens it with its keys introduces its first key'
        : `this database seals under key ${known.sealing} (keys it has sealed under: ${known.known.join(', ')})`,
      ...(refusal ? [`with the keys configured now, every process refuses to write: ${refusal}`] : []),
    ].join('\n'),
  );
}

async function introduceKey(opts: JsonOption): Promise<void> {
  const keyring = await configuredKeyring();
  const { databaseKeys, introduceSealingKey } = await import('../crypto/known-keys.ts');
  const { missingSealingKeys, storedSealingKeyIds } = await import('../crypto/stored-keys.ts');
  const next = keyring.currentKeyId;
  const { unchanged, before } = await withDatabase(async (h) => {
    const now = new Date();
    const known = await databaseKeys(h.db);
    // Whoever introduces a key proves they hold the database's: the one it seals under (or, when
    // it records none, every key its stored secrets are sealed under), and every key a stored secret needs.
    const held = known.sealing === null ? await storedSealingKeyIds(h.db, now) : [known.sealing];
    const needed = new Set([...held, ...(await missingSealingKeys(h.db, keyring, now)).map((key) => key.key_id)]);
    const missing = [...needed].filter((id) => !keyring.keyIds.includes(id));
    if (missing.length > 0) {
      throw new UsageError(
        `refusing to introduce key ${next}: the keys after it must open what this database holds, sealed under key ${missing.join(' and ')}: UGS_SECRET_KEY="<key ${next}>,<key ${missing[0]}>"`,
      );
    }
    if (known.sealing === next) return { unchanged: true, before: next };
    return { unchanged: false, before: await introduceSealingKey(h, next, now) };
  });
  if (unchanged) {
    print(opts, { sealing_key_id: next, previous_sealing_key_id: next }, `key ${next} already seals for this database: nothing to do`);
    return;
  }
  print(
    opts,
    { sealing_key_id: next, previous_sealing_key_id: before },
    before === null
      ? `key ${next} is now this database's sealing key`
      : [
          `key ${next} now seals for this database, after key ${before}. From now on a process must have ${next} first to write:`,
          `  start every instance with UGS_SECRET_KEY="<key ${next}>,<key ${before}>" (the instances still running keep sealing under ${before}, which the new ones open),`,
          `  then run npx ugs keys reencrypt with those keys, and once every instance has ${next} first, drop ${before} (docs/security.md, "Secret keys").`,
        ].join('\n'),
  );
}

async function reencrypt(opts: JsonOption & { batchSize: number }): Promise<void> {
  const { reencryptUserGroupTokens, reencryptWebhookSecrets } = await import('../crypto/reencrypt.ts');
  const { reencryptSigningKeys } = await import('../embed/signing-keys.ts');
  const [keyring, outcome, signing, webhookSecrets] = await withDatabaseKeys(
    async (h, keyring) =>
      [
        keyring,
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
  const keyring = await configuredKeyring();
  for (const keyId of keyIds) {
    if (keyring.keyIds.includes(keyId))
      throw new UsageError(`key ${keyId} is configured, so its tokens can be read: move them with ugs keys reencrypt instead`);
  }
  const { reissueTokensOfLostKey } = await import('../user-groups/lost-key.service.ts');
  const { replaceSigningKeysOfLostKey } = await import('../embed/signing-keys.ts');
  const { databaseKeys, introduceSealingKey, sealingKeyProblem } = await import('../crypto/known-keys.ts');
  const outcomes = await withDatabase(async (h) => {
    // What is reissued is sealed under the first configured key: the database's sealing key, or,
    // when the key lost is that one (or the database records none yet), the key that takes its place.
    const known = await databaseKeys(h.db);
    if (known.sealing === null || keyIds.includes(known.sealing)) await introduceSealingKey(h, keyring.currentKeyId, new Date());
    else {
      const problem = sealingKeyProblem(known, keyring, 'configured now');
      if (problem) throw new Error(`refusing to write: ${problem}`);
    }
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
  const algorithm = opts.alg ?? loadConfig().embedSigningAlgorithm;
  const { rotateSigningKey } = await import('../embed/signing-keys.ts');
  const rotation = await withDatabaseKeys((h, keyring) => rotateSigningKey(h, keyring, new Date(), opts.activateIn, algorithm));
  print(
    opts,
    rotation,
    [
      `added embed signing key ${rotation.kid} (${rotation.algorithm}); it signs from ${rotation.activates_at}`,
      ...rotation.dropped.map((kid) => `dropped key ${kid}: every token it signed has expired`),
    ].join('\n'),
  );
  if (rotation.algorithm === 'EdDSA') {
    // docs/api.md, "Keys": the default key set lists no EdDSA key, so that no verifier that
    // cannot read one (Cube) is broken by its publication; the tokens it signs verify only
    // against the set that lists it.
    process.stderr.write(
      `ugs: EdDSA keys are published only at /.well-known/jwks.json?alg=ES256,RS256,EdDSA, not at /.well-known/jwks.json: ` +
        `from ${rotation.activates_at}, when ${rotation.kid} signs, a verifier pointed at /.well-known/jwks.json (or at the discovery document's jwks_uri) refuses the new tokens. ` +
        'Point every verifier at the ?alg= URL before then, or rotate again to ES256 (docs/api.md, "Keys")\n',
    );
  }
}
