import { randomBytes, randomUUID } from 'node:crypto';
import { UsageError } from '@trace-ingest/shared/errors';
import { hashApiKey } from '@trace-ingest/shared/ids';
import { openControlDriver, type ControlDriverOptions } from './control-database.js';
import type { ControlDriver } from './control-store.js';

/**
 * Tokens for the read-only cost console. Like API keys, only the SHA-256 of
 * a token is stored and its first 12 characters (the prefix) are what ops
 * see afterwards; a token is revoked, never deleted. A token may be limited
 * to one org (orgId) or see every org (null).
 *
 * The rules and the SQL live here once, run by the control store's driver of
 * each dialect (`ControlDriver`, as the control store itself is): the SQL is
 * the subset SQLite and PostgreSQL read alike. The table comes with the
 * control store's migrations, which the driver applies when it opens.
 */

export const CONSOLE_TOKEN_PREFIX = 'tic_';
const TOKEN_PATTERN = /^tic_[A-Za-z0-9_-]{20,200}$/;
const PREFIX_LENGTH = 12;

export interface ConsoleTokenInfo {
  id: string;
  name: string;
  prefix: string;
  /** null: every org. */
  orgId: string | null;
  orgName: string | null;
  createdAt: number;
  revokedAt: number | null;
}

export interface CreatedConsoleToken extends ConsoleTokenInfo {
  /** The full token; shown once, never stored. */
  token: string;
}

/** What a request presenting a valid, non-revoked token may see. */
export interface ConsoleGrant {
  tokenId: string;
  orgId: string | null;
}

const TOKEN_COLUMNS = `t.id AS id, t.name AS name, t.prefix AS prefix, t.org_id AS "orgId", o.name AS "orgName",
  t.created_at AS "createdAt", t.revoked_at AS "revokedAt"`;
const TOKEN_SELECT = `SELECT ${TOKEN_COLUMNS} FROM console_tokens t LEFT JOIN orgs o ON o.id = t.org_id`;

export function isWellFormedConsoleToken(token: string): boolean {
  return TOKEN_PATTERN.test(token);
}

export class ConsoleTokens {
  constructor(private readonly driver: ControlDriver) {}

  start(): Promise<void> {
    return this.driver.open();
  }

  close(): Promise<void> {
    return this.driver.close();
  }

  /** A new token from a CSPRNG, for every org (orgId null) or one org. */
  async create(input: { name?: string | undefined; orgId: string | null; orgName: string | null }): Promise<CreatedConsoleToken> {
    const token = CONSOLE_TOKEN_PREFIX + randomBytes(32).toString('base64url');
    const info = {
      id: `ctok_${randomUUID().replaceAll('-', '')}`,
      name: input.name ?? '',
      prefix: token.slice(0, PREFIX_LENGTH),
      orgId: input.orgId,
      createdAt: Date.now(),
      revokedAt: null,
    };
    await this.driver.all('INSERT INTO console_tokens (id, name, prefix, token_hash, org_id, created_at) VALUES (?, ?, ?, ?, ?, ?)', [
      info.id,
      info.name,
      info.prefix,
      hashApiKey(token),
      info.orgId,
      info.createdAt,
    ]);
    return { ...info, orgName: input.orgName, token };
  }

  list(): Promise<ConsoleTokenInfo[]> {
    return this.driver.all<ConsoleTokenInfo>(`${TOKEN_SELECT} ORDER BY t.created_at`, []);
  }

  /** Revoke by id or prefix; throws UsageError when none or several match. Revoking twice is a no-op. */
  async revoke(prefixOrId: string): Promise<ConsoleTokenInfo> {
    const matches = await this.driver.all<ConsoleTokenInfo>(`${TOKEN_SELECT} WHERE t.id = ? OR t.prefix = ? ORDER BY t.created_at`, [prefixOrId, prefixOrId]);
    const [only] = matches;
    if (only === undefined) throw new UsageError(`no console token with id or prefix "${prefixOrId}"; see "trace-ingest console token list"`);
    if (matches.length > 1) throw new UsageError(`prefix "${prefixOrId}" matches ${matches.length} console tokens; revoke by id instead`);
    if (only.revokedAt !== null) return only;
    const revokedAt = Date.now();
    await this.driver.all('UPDATE console_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL', [revokedAt, only.id]);
    return { ...only, revokedAt };
  }

  /** The grant of a presented token; null when malformed, unknown or revoked. Compared by hash. */
  async resolve(token: string): Promise<ConsoleGrant | null> {
    if (!isWellFormedConsoleToken(token)) return null;
    const [row] = await this.driver.all<{ id: string; orgId: string | null }>(
      'SELECT id, org_id AS "orgId" FROM console_tokens WHERE token_hash = ? AND revoked_at IS NULL',
      [hashApiKey(token)],
    );
    return row === undefined ? null : { tokenId: row.id, orgId: row.orgId };
  }
}

/** The console tokens in the control store's database: PostgreSQL when DATABASE_URL is set, else the SQLite file. */
export async function openConsoleTokens(opts: ControlDriverOptions): Promise<ConsoleTokens> {
  return new ConsoleTokens(await openControlDriver(opts));
}
