import { randomBytes, randomUUID } from 'node:crypto';
import { UsageError } from '@trace-ingest/shared/errors';
import { hashApiKey } from '@trace-ingest/shared/ids';

/**
 * Tokens for the read-only cost console. Like API keys, only the SHA-256 of
 * a token is stored and its first 12 characters (the prefix) are what ops
 * see afterwards; a token is revoked, never deleted. A token may be limited
 * to one org (orgId) or see every org (null).
 *
 * The rules live here once; the SQLite and PostgreSQL parts only store rows
 * (console-tokens-sqlite.ts, console-tokens-postgres.ts). The table is
 * created by the key store's migrations, so open the key store first.
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

export interface ConsoleTokenRow {
  id: string;
  name: string;
  prefix: string;
  tokenHash: string;
  orgId: string | null;
  createdAt: number;
  revokedAt: number | null;
}

/** The per-dialect part: plain row storage. */
export interface ConsoleTokenDriver {
  start(): Promise<void>;
  close(): Promise<void>;
  insert(row: ConsoleTokenRow): Promise<void>;
  /** A non-revoked token by hash. */
  activeByHash(tokenHash: string): Promise<{ id: string; orgId: string | null } | null>;
  /** With org names; `match` limits to rows whose id or prefix equals it. */
  list(match?: string): Promise<ConsoleTokenInfo[]>;
  /** Sets revoked_at when still NULL. */
  revoke(id: string, at: number): Promise<void>;
}

export function isWellFormedConsoleToken(token: string): boolean {
  return TOKEN_PATTERN.test(token);
}

export class ConsoleTokens {
  constructor(private readonly driver: ConsoleTokenDriver) {}

  start(): Promise<void> {
    return this.driver.start();
  }

  close(): Promise<void> {
    return this.driver.close();
  }

  /** A new token from a CSPRNG, for every org (orgId null) or one org. */
  async create(input: { name?: string | undefined; orgId: string | null; orgName: string | null }): Promise<CreatedConsoleToken> {
    const token = CONSOLE_TOKEN_PREFIX + randomBytes(32).toString('base64url');
    const row: ConsoleTokenRow = {
      id: `ctok_${randomUUID().replaceAll('-', '')}`,
      name: input.name ?? '',
      prefix: token.slice(0, PREFIX_LENGTH),
      tokenHash: hashApiKey(token),
      orgId: input.orgId,
      createdAt: Date.now(),
      revokedAt: null,
    };
    await this.driver.insert(row);
    const { tokenHash: _hash, ...info } = row;
    return { ...info, orgName: input.orgName, token };
  }

  list(): Promise<ConsoleTokenInfo[]> {
    return this.driver.list();
  }

  /** Revoke by id or prefix; throws UsageError when none or several match. Revoking twice is a no-op. */
  async revoke(prefixOrId: string): Promise<ConsoleTokenInfo> {
    const matches = await this.driver.list(prefixOrId);
    const [only] = matches;
    if (only === undefined) throw new UsageError(`no console token with id or prefix "${prefixOrId}"; see "trace-ingest console token list"`);
    if (matches.length > 1) throw new UsageError(`prefix "${prefixOrId}" matches ${matches.length} console tokens; revoke by id instead`);
    if (only.revokedAt !== null) return only;
    const revokedAt = Date.now();
    await this.driver.revoke(only.id, revokedAt);
    return { ...only, revokedAt };
  }

  /** The grant of a presented token; null when malformed, unknown or revoked. Compared by hash. */
  async resolve(token: string): Promise<ConsoleGrant | null> {
    if (!isWellFormedConsoleToken(token)) return null;
    const row = await this.driver.activeByHash(hashApiKey(token));
    return row === null ? null : { tokenId: row.id, orgId: row.orgId };
  }
}

/** The console tokens next to the key store: PostgreSQL when DATABASE_URL is set, else the SQLite file. */
export async function openConsoleTokens(opts: { sqliteFile: string; databaseUrl?: string | undefined }): Promise<ConsoleTokens> {
  if (opts.databaseUrl !== undefined) {
    const { PostgresConsoleTokenDriver } = await import('./console-tokens-postgres.js');
    return new ConsoleTokens(new PostgresConsoleTokenDriver(opts.databaseUrl));
  }
  const { SqliteConsoleTokenDriver } = await import('./console-tokens-sqlite.js');
  return new ConsoleTokens(new SqliteConsoleTokenDriver(opts.sqliteFile));
}
