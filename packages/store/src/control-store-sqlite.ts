import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { ServiceUnavailableError } from '@trace-ingest/shared/errors';
import { SqlControlStore, type ControlDriver, type SqlStatement } from './control-store.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/sqlite', import.meta.url));

export interface SqliteControlOptions {
  /**
   * How long a write waits for another process's write lock (default 5 s,
   * for the CLI). better-sqlite3 waits synchronously, on the event loop: the
   * server passes 0, so a locked file fails its usage update at once (the
   * quota reconciler owes the count and retries) instead of stalling every
   * request. Opening and migrating always wait up to 5 s.
   */
  busyTimeoutMs?: number;
}

/**
 * SQLite under the control store: one file under DATA_DIR, shared by the
 * server and the CLI (WAL mode lets both open it at once). Statements are
 * prepared once per text and kept: the hot path pays no parse per request.
 */
export class SqliteControlDriver implements ControlDriver {
  readonly kind = 'sqlite';
  private db: Database.Database | undefined;
  private readonly statements = new Map<string, Database.Statement>();
  /** Per name (any word of a write statement's text), how many writes of this connection named it: see `version`. */
  private readonly writes = new Map<string, number>();
  private readonly wordsOf = new Map<string, readonly string[]>();
  private dataVersion: Database.Statement | undefined;
  /** Opens of this driver: a new connection's data_version restarts from its own value. */
  private opens = 0;

  constructor(
    private readonly file: string,
    private readonly opts: SqliteControlOptions = {},
  ) {}

  open(): Promise<void> {
    if (this.db !== undefined) return Promise.resolve();
    fs.mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
    const created = !fs.existsSync(this.file);
    const db = new Database(this.file);
    // The owner's alone, whatever the umask (its -wal and -shm files take the same mode).
    if (created) fs.chmodSync(this.file, 0o600);
    try {
      db.pragma('journal_mode = WAL');
      db.pragma('busy_timeout = 5000');
      db.pragma('synchronous = NORMAL');
      db.pragma('foreign_keys = ON');
      migrate(drizzle(db), { migrationsFolder: MIGRATIONS_DIR });
      db.pragma(`busy_timeout = ${this.opts.busyTimeoutMs ?? 5000}`);
    } catch (e) {
      db.close();
      throw e;
    }
    this.db = db;
    this.opens++;
    return Promise.resolve();
  }

  close(): Promise<void> {
    const db = this.db;
    this.db = undefined;
    this.statements.clear();
    this.dataVersion = undefined;
    db?.close();
    return Promise.resolve();
  }

  private run(sql: string, params: readonly unknown[]): unknown[] {
    let stmt = this.statements.get(sql);
    if (stmt === undefined) {
      if (this.db === undefined) throw new Error('control store is not started');
      stmt = this.db.prepare(sql);
      this.statements.set(sql, stmt);
    }
    // Counted before it runs: a write that fails changes nothing, and counting it only makes a reader read again.
    if (!stmt.readonly) this.noteWrite(sql);
    if (stmt.reader) return stmt.all(...params);
    stmt.run(...params);
    return [];
  }

  private noteWrite(sql: string): void {
    let words = this.wordsOf.get(sql);
    if (words === undefined) {
      words = [...new Set(sql.toLowerCase().match(/[a-z_][a-z0-9_]*/g) ?? [])];
      this.wordsOf.set(sql, words);
    }
    for (const w of words) this.writes.set(w, (this.writes.get(w) ?? 0) + 1);
  }

  /**
   * SQLite's data_version (it changes when another connection, such as the CLI's, commits) with this connection's
   * writes that named `tables`: a few µs, where reading a key's row was ~80 µs of a request.
   */
  version(tables: readonly string[]): string {
    const db = this.db;
    if (db === undefined) throw new Error('control store is not started');
    this.dataVersion ??= db.prepare('PRAGMA data_version').pluck();
    let token = `${this.opens}:${String(this.dataVersion.get())}`;
    for (const t of tables) token += `:${this.writes.get(t) ?? 0}`;
    return token;
  }

  all<R>(sql: string, params: readonly unknown[]): Promise<R[]> {
    try {
      return Promise.resolve(this.run(sql, params) as R[]);
    } catch (e) {
      return Promise.reject(locked(e));
    }
  }

  transaction(statements: readonly SqlStatement[]): Promise<unknown[][]> {
    try {
      const db = this.db;
      if (db === undefined) throw new Error('control store is not started');
      return Promise.resolve(db.transaction(() => statements.map((s) => this.run(s.sql, s.params)))());
    } catch (e) {
      return Promise.reject(locked(e));
    }
  }

  isUniqueViolation(e: unknown): boolean {
    const code = (e as { code?: unknown } | null)?.code;
    return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
  }
}

/**
 * Another process holds the lock (the CLI writing, a backup): with no busy wait the
 * call fails at once, and the caller is told to retry (503 + Retry-After) rather than
 * given a 500.
 */
function locked(e: unknown): Error {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')))
    return new ServiceUnavailableError('control store (SQLite) is locked by another process; retry shortly', 1, e);
  return e as Error;
}

/** The embedded control store (the default). */
export class SqliteControlStore extends SqlControlStore {
  constructor(file: string, opts?: SqliteControlOptions) {
    super(new SqliteControlDriver(file, opts));
  }
}
