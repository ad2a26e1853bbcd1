import { and, asc, eq, isNull, or } from 'drizzle-orm';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { ServiceUnavailableError } from '@trace-ingest/shared/errors';
import type { ConsoleTokenDriver, ConsoleTokenInfo, ConsoleTokenRow } from './console-tokens.js';
import { parseDatabaseUrl } from './control-store-postgres.js';
import { consoleTokens, orgs } from './schema/postgres.js';

/**
 * Console tokens in the key store's PostgreSQL schema (`?schema=` in
 * DATABASE_URL, as the key store reads it), over a small pool of their own.
 */
export class PostgresConsoleTokenDriver implements ConsoleTokenDriver {
  private pool: pg.Pool | undefined;
  private db: NodePgDatabase | undefined;
  private readonly config: pg.PoolConfig;

  constructor(url: string, opts: { schema?: string } = {}) {
    const parsed = parseDatabaseUrl(url);
    const schema = opts.schema ?? parsed.schema ?? 'public';
    this.config = {
      connectionString: parsed.url,
      max: 2,
      connectionTimeoutMillis: 3000,
      idleTimeoutMillis: 30_000,
      application_name: 'trace-ingest-console',
      // The key store validated the schema name (lower-case identifier) before migrating it.
      options: [parsed.options, `-c search_path=${schema}`].filter((o) => o !== '').join(' '),
    };
  }

  async start(): Promise<void> {
    if (this.pool !== undefined) return;
    const pool = new pg.Pool(this.config);
    pool.on('error', () => undefined);
    this.pool = pool;
    this.db = drizzle(pool);
    return Promise.resolve();
  }

  async close(): Promise<void> {
    const p = this.pool;
    this.pool = undefined;
    this.db = undefined;
    await p?.end();
  }

  private async run<T>(fn: (db: NodePgDatabase) => Promise<T>): Promise<T> {
    if (this.db === undefined) throw new Error('console tokens are not open');
    try {
      return await fn(this.db);
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (typeof code === 'string' && (code === 'ECONNREFUSED' || code.startsWith('08') || code.startsWith('57P'))) {
        throw new ServiceUnavailableError('key store (PostgreSQL) is unreachable; retry shortly', 2, e);
      }
      throw e;
    }
  }

  async insert(row: ConsoleTokenRow): Promise<void> {
    await this.run((db) => db.insert(consoleTokens).values(row));
  }

  async activeByHash(tokenHash: string): Promise<{ id: string; orgId: string | null } | null> {
    const [row] = await this.run((db) =>
      db
        .select({ id: consoleTokens.id, orgId: consoleTokens.orgId })
        .from(consoleTokens)
        .where(and(eq(consoleTokens.tokenHash, tokenHash), isNull(consoleTokens.revokedAt))),
    );
    return row ?? null;
  }

  async list(match?: string): Promise<ConsoleTokenInfo[]> {
    return this.run((db) => {
      const q = db
        .select({
          id: consoleTokens.id,
          name: consoleTokens.name,
          prefix: consoleTokens.prefix,
          orgId: consoleTokens.orgId,
          orgName: orgs.name,
          createdAt: consoleTokens.createdAt,
          revokedAt: consoleTokens.revokedAt,
        })
        .from(consoleTokens)
        .leftJoin(orgs, eq(orgs.id, consoleTokens.orgId));
      return match === undefined
        ? q.orderBy(asc(consoleTokens.createdAt))
        : q.where(or(eq(consoleTokens.id, match), eq(consoleTokens.prefix, match))).orderBy(asc(consoleTokens.createdAt));
    });
  }

  async revoke(id: string, at: number): Promise<void> {
    await this.run((db) =>
      db
        .update(consoleTokens)
        .set({ revokedAt: at })
        .where(and(eq(consoleTokens.id, id), isNull(consoleTokens.revokedAt))),
    );
  }
}
