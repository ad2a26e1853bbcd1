import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '@trace-ingest/shared/errors';

/**
 * Credentials kept in the control store (webhook signing secrets) are sealed
 * with AES-256-GCM under a key the operator provides (SECRETS_KEY or
 * SECRETS_KEY_FILE: 32 bytes as base64 or hex; several keys, newest first,
 * one a line, to rotate it). A sealed value reads
 * `enc:v1:<key id>:<iv>:<ciphertext>:<tag>` (base64url), the key id being the
 * first 8 hex digits of the key's SHA-256, so a value sealed under an older
 * key is opened with it and sealed again under the newest by `migrate` or a
 * server start.
 *
 * Without a configured key, an install whose control store is its own SQLite
 * file keeps a generated key in DATA_DIR/secrets.key (0600): a copy of the
 * database alone (a backup, a dump) then holds no usable secret. Replicas
 * sharing PostgreSQL must be given the same key, so there it is required.
 */

const PREFIX = 'enc:v1:';

export interface SecretBoxOptions {
  /** SECRETS_KEY or the content of SECRETS_KEY_FILE. */
  keys: string | undefined;
  /** Where a generated key is kept when none is configured (DATA_DIR/secrets.key). */
  keyFile: string;
  /** The control store is shared by several processes on several machines (PostgreSQL): a generated key would differ on each. */
  shared: boolean;
}

interface Key {
  id: string;
  bytes: Buffer;
}

function parseKey(text: string, where: string): Key {
  const t = text.trim();
  const bytes = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (bytes.length !== 32) throw new ConfigError(`${where}: a key is 32 bytes, as base64 (44 characters) or hex (64); e.g. "openssl rand -base64 32"`);
  return { id: createHash('sha256').update(bytes).digest('hex').slice(0, 8), bytes };
}

export function isSealed(value: string): boolean {
  return value.startsWith(PREFIX);
}

export class SecretBox {
  private keys: Key[] | undefined;

  constructor(private readonly opts: SecretBoxOptions) {}

  /** Whether the operator configured the key (SECRETS_KEY or SECRETS_KEY_FILE), or a generated one is in use. */
  get configured(): boolean {
    return this.opts.keys !== undefined;
  }

  /** The id of the key new values are sealed under. */
  currentKeyId(create = false): string | undefined {
    return this.load(create)[0]?.id;
  }

  seal(plain: string): string {
    const [key] = this.load(true);
    if (key === undefined) throw new ConfigError('no key to seal secrets with');
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key.bytes, iv);
    const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return `${PREFIX}${key.id}:${[iv, ct, cipher.getAuthTag()].map((b) => b.toString('base64url')).join(':')}`;
  }

  /** The plain value of a sealed one (a value stored before sealing existed is returned as it is). */
  open(stored: string): string {
    if (!isSealed(stored)) return stored;
    const [id, iv, ct, tag] = stored.slice(PREFIX.length).split(':');
    const key = this.load(false).find((k) => k.id === id);
    if (key === undefined || iv === undefined || ct === undefined || tag === undefined)
      throw new ConfigError(
        `a webhook secret is sealed under key ${id ?? '?'}, which this process does not have: give it SECRETS_KEY_FILE with that key ` +
          '(newest first, one a line) as the server that sealed it has',
      );
    const decipher = createDecipheriv('aes-256-gcm', key.bytes, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
  }

  /** True when `stored` is plain text or sealed under a key other than the newest: `migrate` seals it again. */
  needsSealing(stored: string): boolean {
    return !isSealed(stored) || !stored.startsWith(`${PREFIX}${this.currentKeyId(true) ?? ''}:`);
  }

  private load(create: boolean): Key[] {
    if (this.keys !== undefined) return this.keys;
    if (this.opts.keys !== undefined) {
      this.keys = this.opts.keys
        .split(/[\n,]/)
        .map((l) => l.trim())
        .filter((l) => l !== '')
        .map((l, i) => parseKey(l, `SECRETS_KEY (key ${i + 1})`));
      return this.keys;
    }
    if (this.opts.shared)
      throw new ConfigError(
        'webhook secrets are sealed with SECRETS_KEY_FILE (or SECRETS_KEY), which every replica sharing DATABASE_URL and the CLI must be given: ' +
          'create one with "openssl rand -base64 32 > secrets.key"',
      );
    if (fs.existsSync(this.opts.keyFile)) {
      this.keys = [parseKey(fs.readFileSync(this.opts.keyFile, 'utf8'), this.opts.keyFile)];
      return this.keys;
    }
    if (!create) return [];
    fs.mkdirSync(path.dirname(this.opts.keyFile), { recursive: true, mode: 0o700 });
    try {
      // wx: two processes creating it at once keep the first one's key.
      fs.writeFileSync(this.opts.keyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    this.keys = [parseKey(fs.readFileSync(this.opts.keyFile, 'utf8'), this.opts.keyFile)];
    return this.keys;
  }
}

/** The box of an install: its configured key, or (one SQLite control store) DATA_DIR/secrets.key. */
export function secretBoxFor(c: { secretsKey: string | undefined; dataDir: string; DATABASE_URL?: string | undefined }): SecretBox {
  return new SecretBox({ keys: c.secretsKey, keyFile: path.join(c.dataDir, 'secrets.key'), shared: c.DATABASE_URL !== undefined });
}
