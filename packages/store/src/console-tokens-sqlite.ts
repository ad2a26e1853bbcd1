import Database from 'better-sqlite3';
import { and, asc, eq, isNull, or } from 'drizzle-orm';
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import type { ConsoleTokenDriver, ConsoleTokenInfo, ConsoleTokenRow } from './console-tokens.js';
import { consoleTokens, orgs } from './schema/sqlite.js';

/** Console tokens in the key store's SQLite file, over a connection of their own (WAL lets both open it). */
export class SqliteConsoleTokenDriver implements ConsoleTokenDriver {
  private sqlite: Database.Database | undefined;
  private db: BetterSQLite3Database | undefined;

  constructor(private readonly file: string) {}

  async start(): Promise<void> {
    if (this.sqlite !== undefined) return;
    const sqlite = new Database(this.file, { fileMustExist: true });
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
    this.sqlite = sqlite;
    this.db = drizzle(sqlite);
    return Promise.resolve();
  }

  async close(): Promise<void> {
    const s = this.sqlite;
    this.sqlite = undefined;
    this.db = undefined;
    s?.close();
    return Promise.resolve();
  }

  private orm(): BetterSQLite3Database {
    if (this.db === undefined) throw new Error('console tokens are not open');
    return this.db;
  }

  async insert(row: ConsoleTokenRow): Promise<void> {
    this.orm().insert(consoleTokens).values(row).run();
    return Promise.resolve();
  }

  async activeByHash(tokenHash: string): Promise<{ id: string; orgId: string | null } | null> {
    const row = this.orm()
      .select({ id: consoleTokens.id, orgId: consoleTokens.orgId })
      .from(consoleTokens)
      .where(and(eq(consoleTokens.tokenHash, tokenHash), isNull(consoleTokens.revokedAt)))
      .get();
    return Promise.resolve(row ?? null);
  }

  async list(match?: string): Promise<ConsoleTokenInfo[]> {
    const q = this.orm()
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
    const rows =
      match === undefined
        ? q.orderBy(asc(consoleTokens.createdAt)).all()
        : q
            .where(or(eq(consoleTokens.id, match), eq(consoleTokens.prefix, match)))
            .orderBy(asc(consoleTokens.createdAt))
            .all();
    return Promise.resolve(rows);
  }

  async revoke(id: string, at: number): Promise<void> {
    this.orm()
      .update(consoleTokens)
      .set({ revokedAt: at })
      .where(and(eq(consoleTokens.id, id), isNull(consoleTokens.revokedAt)))
      .run();
    return Promise.resolve();
  }
}
