// The secret keys that protect user group tokens (and embed signing keys) at rest. A token is stored as AES-256-GCM
// ciphertext tagged with the id of the key that sealed it, so keys can rotate without
// downtime: the newest key seals, every listed key still opens what it sealed.
import crypto from 'node:crypto';
import { randomBytes } from '../foundations/random-pool.ts';
import fs from 'node:fs';
import path from 'node:path';

const KEY_BYTES = 32;
const IV_BYTES = 12;
// Binds every ciphertext to its purpose, so it cannot be replayed as another kind of secret.
const AAD = {
  'user-group-token': Buffer.from('ugs:user-group-token:v1'),
  'embed-signing-key': Buffer.from('ugs:embed-signing-key:v1'),
  'webhook-secret': Buffer.from('ugs:webhook-secret:v1'),
  // Stored answers of idempotent requests (idempotency/idempotency.ts): kept 24 h, never re-sealed.
  'idempotent-answer': Buffer.from('ugs:idempotent-answer:v1'),
};
export type SealedSecret = keyof typeof AAD;

interface Key {
  id: string;
  secret: Buffer;
  /** The secret as a KeyObject, made once: a cipher given the raw bytes makes one at every call (docs/performance.md, "Why the code is the way it is"). */
  keyObject: crypto.KeyObject;
}

export class Keyring {
  private readonly keys: Key[];
  private readonly byId: Map<string, Key>;

  constructor(secrets: Buffer[]) {
    if (secrets.length === 0) throw new Error('a keyring needs at least one key');
    this.keys = secrets.map((secret) => {
      if (secret.length !== KEY_BYTES) throw new Error(`secret keys must be ${KEY_BYTES} bytes`);
      return { id: keyId(secret), secret, keyObject: crypto.createSecretKey(secret) };
    });
    this.byId = new Map(this.keys.map((k) => [k.id, k]));
  }

  get currentKeyId(): string {
    return this.keys[0].id;
  }

  get keyIds(): string[] {
    return this.keys.map((k) => k.id);
  }

  seal(plaintext: string, purpose: SealedSecret = 'user-group-token'): string {
    const key = this.keys[0];
    const iv = randomBytes(IV_BYTES);
    const cipher = crypto.createCipheriv('aes-256-gcm', key.keyObject, iv);
    cipher.setAAD(AAD[purpose]);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [key.id, iv.toString('base64url'), body.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
  }

  /** Opening costs a new cipher context each time; user group tokens are remembered by OpenedTokenCache. */
  open(sealed: string, purpose: SealedSecret = 'user-group-token'): string {
    const [id, iv, body, tag] = sealed.split('.');
    const key = this.byId.get(id);
    if (!key) throw new Error(`no secret key with id ${id} is configured (UGS_SECRET_KEY)`);
    const decipher = crypto.createDecipheriv('aes-256-gcm', key.keyObject, Buffer.from(iv, 'base64url'));
    decipher.setAAD(AAD[purpose]);
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
  }

  /** The key id a sealed value was sealed with (for re-encryption after a key rotation). */
  static sealedKeyId(sealed: string): string {
    return sealed.slice(0, sealed.indexOf('.'));
  }

  /** A key for another purpose (verifying the HS256 embed tokens of earlier versions), derived so that one secret serves all. */
  deriveKeyById(purpose: string, id: string): Buffer | undefined {
    const key = this.byId.get(id);
    if (!key) return undefined;
    return Buffer.from(crypto.hkdfSync('sha256', key.secret, Buffer.alloc(0), `ugs:${purpose}`, KEY_BYTES));
  }
}

function keyId(secret: Buffer): string {
  return crypto.createHash('sha256').update('ugs:key-id:').update(secret).digest('hex').slice(0, 8);
}

function parseSecretKey(text: string): Buffer {
  const trimmed = text.trim();
  const decoded = /^[0-9a-fA-F]{64}$/.test(trimmed) ? Buffer.from(trimmed, 'hex') : Buffer.from(trimmed, 'base64');
  if (decoded.length !== KEY_BYTES) {
    throw new Error(`a secret key must be ${KEY_BYTES} bytes, as 64 hex digits or base64 (try: openssl rand -base64 32)`);
  }
  return decoded;
}

/**
 * Keys from UGS_SECRET_KEY (comma-separated, newest first) or, for the embedded default,
 * from a key file created with mode 0600 on first start. Creation is atomic (write a
 * temporary file, then link it into place), so instances starting together agree on one key.
 */
/**
 * `create: false`: a missing key file is an error rather than a new key (a worker of several
 * reads the file its primary made or checked: a key of its own would seal with another key).
 */
export function loadKeyring(secretKeys: string[], keyFile: string, { create = true } = {}): { keyring: Keyring; createdKeyFile: boolean } {
  if (secretKeys.length > 0) return { keyring: new Keyring(secretKeys.map(parseSecretKey)), createdKeyFile: false };
  let createdKeyFile = false;
  if (!create && !fs.existsSync(keyFile)) {
    throw new Error(`the key file ${keyFile} is gone (it was there when the service started): put it back from its backup, or set UGS_SECRET_KEY`);
  }
  if (!fs.existsSync(keyFile)) {
    fs.mkdirSync(path.dirname(path.resolve(keyFile)), { recursive: true, mode: 0o700 });
    const temporary = `${keyFile}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
    fs.writeFileSync(temporary, crypto.randomBytes(KEY_BYTES).toString('base64') + '\n', { mode: 0o600 });
    try {
      fs.linkSync(temporary, keyFile);
      createdKeyFile = true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      fs.unlinkSync(temporary);
    }
  }
  const lines = fs
    .readFileSync(keyFile, 'utf8')
    .split('\n')
    .filter((l) => l.trim());
  return { keyring: new Keyring(lines.map(parseSecretKey)), createdKeyFile };
}

/** The permission bits of a key file that other users can read or write, or null when only its owner can. */
export function keyFileExposure(keyFile: string): string | null {
  const mode = fs.statSync(keyFile).mode & 0o777;
  return (mode & 0o077) === 0 ? null : `0${mode.toString(8)}`;
}
