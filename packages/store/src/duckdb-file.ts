/**
 * The span store's DuckDB file: attaching it (and reattaching it when it was
 * replaced or invalidated), the guard that the path still leads to it, and
 * the writer connection's queue and transactions that the other parts of the
 * store write through.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance, type DuckDBConnection, type DuckDBValue } from '@duckdb/node-api';
import { applyDuckDbMigrations, type DuckDbMigrationLogger } from './duckdb-migrations.js';
import { SpanStoreFileError, SpanStoreRejectedError, SpanStoreSchemaError, type QueryRow } from './span-store.js';

/** The catalog name the spans file is attached as; queries name the table alone. */
const CATALOG = 'spans_store';
const ROW_GROUP_ROWS = 8192;
/**
 * The storage format the file is written in (a file in an older one is brought to it at attach). From v1.5.0 a
 * checkpoint reuses the stored metadata of each unchanged column of each row group; in the older formats it writes
 * every column's metadata of every row group again, a cost per checkpoint that grows with the table.
 */
const STORAGE_VERSION = 'v1.5.0';

// Error classes DuckDB raises when the data itself is wrong (retrying cannot help)...
const REJECTED = /^(Conversion Error|Invalid Input Error|Constraint Error|Binder Error|Out of Range Error)/;
// ...except a table or column the file lacks: its schema is behind, which a migration mends.
const INVALIDATED = /has been invalidated/;
const SCHEMA_BEHIND = /^(Binder Error: Table "[^"]*" does not have a column|Catalog Error: Table with name \S+ does not exist)/;
/** Two transactions changed the same rows (DuckDB's optimistic concurrency): the later one is rolled back. */
const CONFLICT = /^TransactionContext Error:.*conflict/i;
/** Tries of a writer transaction that met a conflict, each after a longer wait (ms): the other one is a short top-list advance. */
const CONFLICT_TRIES = 4;
const CONFLICT_WAIT_MS = 25;

export const isConflict = (e: unknown): boolean => CONFLICT.test(e instanceof Error ? e.message : String(e));

export interface DuckDbFileOptions {
  file: string;
  tmpDir: string;
  memoryLimit?: string | undefined;
  blockAllocatorMemory?: string | undefined;
  threads?: number | undefined;
  logger?: DuckDbMigrationLogger | undefined;
  migrationsDir?: URL | undefined;
  checkpointThreshold?: string | undefined;
  rowGroupRows?: number | undefined;
  storageVersion?: string | undefined;
  readOnly?: boolean | undefined;
}

export class DuckDbFile {
  private instance: DuckDBInstance | undefined;
  private writer: DuckDBConnection | undefined;
  private reader: DuckDBConnection | undefined;
  private seq = 0;
  /** Device and inode of the file opened at start: the path must still lead to it. */
  private identity: string | undefined;
  /** Set while the file is gone from the path. */
  private lost: string | undefined;
  private checking: Promise<void> = Promise.resolve();
  /** The write running on the writer connection: a transaction's statements must not interleave with another's. */
  private writing: Promise<unknown> = Promise.resolve();

  /** `opened` runs after each attach of a writable file, before any write: the parts reload what they derive from the file. */
  constructor(
    private readonly opts: DuckDbFileOptions,
    private readonly opened: () => Promise<void>,
  ) {}

  async open(): Promise<void> {
    if (this.instance !== undefined) return;
    const readOnly = this.opts.readOnly === true;
    if (!readOnly) {
      await fs.mkdir(path.dirname(this.opts.file), { recursive: true, mode: 0o700 });
      await fs.mkdir(this.opts.tmpDir, { recursive: true, mode: 0o700 });
      await removeLoadFiles(this.opts.tmpDir);
    }
    const created = !readOnly && (await fileIdentity(this.opts.file)) === undefined;
    const settings: Record<string, string> = {};
    if (this.opts.memoryLimit !== undefined) settings.memory_limit = this.opts.memoryLimit;
    if (this.opts.threads !== undefined) settings.threads = String(this.opts.threads);
    if (this.opts.blockAllocatorMemory !== undefined) settings.block_allocator_memory = this.opts.blockAllocatorMemory;
    // A checkpoint's cost grows with the file, so fewer of them (a larger threshold than DuckDB's 16 MB) keep the cost per
    // row flat; a checkpoint holds every write, so not so few that one takes long (at 10M spans: 4-5 s at 64 MB, 15 s at 256).
    settings.checkpoint_threshold = this.opts.checkpointThreshold ?? '64MB';
    // Spilled blocks (span texts) stay in DATA_DIR beside the file, not in the working directory.
    settings.temp_directory = `${this.opts.file}.tmp`;
    // Attached to an in-memory instance so it can take ROW_GROUP_SIZE: a checkpoint rewrites the row group
    // being appended to, and a small group keeps that rewrite small when spans carry large texts.
    const instance = await DuckDBInstance.create(':memory:', settings);
    try {
      const boot = await instance.connect();
      const writable = `ROW_GROUP_SIZE ${this.opts.rowGroupRows ?? ROW_GROUP_ROWS}, STORAGE_VERSION ${sqlString(this.opts.storageVersion ?? STORAGE_VERSION)}`;
      await boot.run(`ATTACH ${sqlString(this.opts.file)} AS ${CATALOG} (${readOnly ? 'READ_ONLY' : writable})`);
      if (created) await fs.chmod(this.opts.file, 0o600);
      this.reader = await instance.connect();
      await this.reader.run(`USE ${CATALOG}`);
      if (!readOnly) {
        this.writer = await instance.connect();
        await this.writer.run(`USE ${CATALOG}`);
        await applyDuckDbMigrations(this.writer, this.opts.logger, this.opts.migrationsDir);
      }
      await lockDown(boot, readOnly ? [] : [path.resolve(this.opts.tmpDir)]);
      boot.closeSync();
      this.instance = instance;
      if (!readOnly) await this.opened();
    } catch (e) {
      this.instance = undefined;
      instance.closeSync();
      throw e;
    }
    this.instance = instance;
    this.identity = await fileIdentity(this.opts.file);
  }

  async close(): Promise<void> {
    const instance = this.instance;
    if (instance === undefined) return;
    this.instance = undefined;
    const writer = this.writer;
    this.writer = undefined;
    // Checkpointed now so the next start has no log of DuckDB's own to replay.
    await writer?.run('CHECKPOINT').catch(() => undefined);
    writer?.closeSync();
    this.reader?.closeSync();
    this.reader = undefined;
    // Closing detaches the file: it is then free for another process.
    instance.closeSync();
  }

  async ping(): Promise<void> {
    await this.checkFile();
    try {
      await this.conn('reader').run('SELECT 1');
    } catch (e) {
      await this.reopenIfInvalidated(e instanceof Error ? e.message : String(e));
      throw e;
    }
  }

  /**
   * The open file must still be the one at the path: a file removed (or
   * replaced) under the running server would take rows that vanish at stop.
   * Removed: SpanStoreFileError until a file is back at the path (restored,
   * or made by `trace-ingest migrate`). Replaced: the new file is opened.
   */
  checkFile(): Promise<void> {
    // One check at a time: the flusher and /readyz may both find the file replaced, and only one may reopen it.
    const run = this.checking.then(() => this.checkFileNow());
    this.checking = run.catch(() => undefined);
    return run;
  }

  private async checkFileNow(): Promise<void> {
    if (this.instance === undefined) return;
    const now = await fileIdentity(this.opts.file);
    if (now === this.identity) return;
    if (now === undefined) {
      this.lost =
        `the span store file ${this.opts.file} was removed while the server ran: batches get 503 until a file is back at that path ` +
        '(restore it from a backup, or run "trace-ingest migrate" to start an empty one); acknowledged spans wait in the write log';
      throw new SpanStoreFileError(this.lost);
    }
    await this.close();
    await this.open();
    this.lost = undefined;
  }

  /** After a write: the rows went into the file at the path, not into one removed or replaced meanwhile. */
  async confirmFile(): Promise<void> {
    if ((await fileIdentity(this.opts.file)) !== this.identity) {
      throw new SpanStoreFileError(`the span store file ${this.opts.file} was removed or replaced during an insert; the rows are inserted again`);
    }
  }

  problem(): string | undefined {
    return this.lost;
  }

  private conn(which: 'reader' | 'writer'): DuckDBConnection {
    const c = which === 'reader' ? this.reader : this.writer;
    if (c === undefined) throw new Error('span store is not started');
    return c;
  }

  /** A connection of its own on the attached file, for a read that must not share the reader (the caller closes it). */
  async connect(): Promise<DuckDBConnection> {
    if (this.instance === undefined) throw new Error('span store is not started');
    const conn = await this.instance.connect();
    try {
      await conn.run(`USE ${CATALOG}`);
    } catch (e) {
      conn.closeSync();
      throw e;
    }
    return conn;
  }

  /** Runs `fn` once every write queued before it has finished. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.writing.then(fn);
    this.writing = run.catch(() => undefined);
    return run;
  }

  /**
   * Runs `body` in one transaction on the writer; rolled back whole when it throws. A transaction that met a conflict
   * with a write beside the writer (a top list advanced by a read, see `runOn`) runs again, from the start, after
   * `rerun` (which drops what the body derived in memory from the attempt rolled back).
   */
  async transaction(body: () => Promise<void>, rerun?: () => void): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      if (attempt > 1) rerun?.();
      await this.run('BEGIN TRANSACTION');
      try {
        await body();
        await this.run('COMMIT');
        return;
      } catch (e) {
        await this.conn('writer')
          .run('ROLLBACK')
          .catch(() => undefined);
        if (attempt >= CONFLICT_TRIES || !isConflict(e)) throw e;
        await new Promise((r) => setTimeout(r, CONFLICT_WAIT_MS * attempt));
      }
    }
  }

  /**
   * Runs a statement on a connection of the caller's (from `connect`): a write beside the writer's queue, which
   * DuckDB's optimistic concurrency keeps apart from the writer's own (the later of two that change the same rows fails).
   */
  async runOn(conn: DuckDBConnection, sql: string): Promise<void> {
    await conn.run(sql);
  }

  /** Reads on a connection of the caller's (from `connect`), inside its transaction when it has one open. */
  async rowsOn(conn: DuckDBConnection, sql: string): Promise<QueryRow[]> {
    return (await conn.runAndReadAll(sql)).getRowObjectsJson() as QueryRow[];
  }

  /** Reads through the writer: inside its transaction, or between writes. */
  async rows(sql: string): Promise<QueryRow[]> {
    try {
      return (await this.conn('writer').runAndReadAll(sql)).getRowObjectsJson() as QueryRow[];
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      await this.reopenIfInvalidated(msg);
      throw e;
    }
  }

  /**
   * Reads through the writer as columns, one array of JS values per column name: for many rows of a few numbers, where
   * an object per row costs more than the query (a day's trace fingerprints).
   */
  async columns(sql: string): Promise<Record<string, unknown[]>> {
    try {
      return (await this.conn('writer').runAndReadAll(sql)).getColumnsObjectJS();
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      await this.reopenIfInvalidated(msg);
      throw e;
    }
  }

  /** Runs a write statement; returns the rows it changed. */
  async run(sql: string): Promise<number> {
    try {
      const result = await this.conn('writer').run(sql);
      return Number(result.rowsChanged);
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      if (SCHEMA_BEHIND.test(msg)) throw new SpanStoreSchemaError(msg.split('\n')[0] ?? msg, { cause: e });
      if (REJECTED.test(msg)) throw new SpanStoreRejectedError(msg, { cause: e });
      await this.reopenIfInvalidated(msg);
      throw e;
    }
  }

  /**
   * Appends rows to a temporary table on the writer (inside its transaction, when one is open): for rows built in JS,
   * DuckDB's appender takes a tenth of the time the same rows cost as a VALUES list, which DuckDB parses and plans.
   */
  async appendTemp(table: string, rows: readonly (readonly DuckDBValue[])[]): Promise<void> {
    if (rows.length === 0) return;
    try {
      const appender = await this.conn('writer').createAppender(table, 'main', 'temp');
      try {
        for (const row of rows) {
          for (const value of row) appender.appendValue(value);
          appender.endRow();
        }
        appender.flushSync();
      } finally {
        appender.closeSync();
      }
    } catch (e) {
      await this.reopenIfInvalidated(e instanceof Error ? e.message : String(e));
      throw e;
    }
  }

  /** A read on the reader connection, which a write in progress does not hold up. */
  async query(sql: string, params: readonly unknown[] = []): Promise<QueryRow[]> {
    try {
      const reader = await this.conn('reader').runAndReadAll(sql, params as DuckDBValue[]);
      return reader.getRowObjectsJson() as QueryRow[];
    } catch (e) {
      await this.reopenIfInvalidated(e instanceof Error ? e.message : String(e));
      throw e;
    }
  }

  /** The distinct UTC days (as text) of the rows of `from` (a table, or a table with its WHERE clause). */
  async days(from: string): Promise<string[]> {
    return (await this.rows(`SELECT DISTINCT CAST(start_date AS VARCHAR) AS d FROM ${from}`)).map((r) => String(r.d));
  }

  /**
   * A checkpoint that failed (a full disk) invalidates the attached file: every
   * later statement fails until it is detached and attached again, which
   * replays DuckDB's own log. Reopened here, so the store recovers by itself
   * once there is room; the failed statement is retried by its caller.
   */
  private async reopenIfInvalidated(msg: string): Promise<void> {
    if (!INVALIDATED.test(msg) || this.instance === undefined) return;
    const reopen = this.checking.then(async () => {
      await this.close();
      await this.open();
    });
    this.checking = reopen.catch(() => undefined);
    await reopen.catch(() => undefined);
  }

  /**
   * Writes the chunks to a load file in the store's own folder (the one
   * folder lockDown leaves readable) and runs `body` with the file's name as
   * a SQL string; the file is removed after.
   */
  async withLoadFile(chunks: readonly Buffer[], body: (file: string) => Promise<void>): Promise<void> {
    const file = path.join(this.opts.tmpDir, `load-${process.pid}-${++this.seq}.ndjson`);
    try {
      // Made again each time: an operator may have removed the folder while the server ran.
      await fs.mkdir(this.opts.tmpDir, { recursive: true, mode: 0o700 });
      await writeChunks(file, chunks);
      await body(sqlString(file));
    } finally {
      await fs.rm(file, { force: true });
    }
  }

  async disk(): Promise<{ usedBytes: number; freeBytes: number | undefined }> {
    let usedBytes = 0;
    for (const f of [this.opts.file, `${this.opts.file}.wal`])
      usedBytes += await fs.stat(f).then(
        (st) => st.size,
        () => 0,
      );
    const st = await fs.statfs(path.dirname(this.opts.file)).catch(() => undefined);
    return { usedBytes, freeBytes: st === undefined ? undefined : st.bavail * st.bsize };
  }
}

export function sqlString(s: string): string {
  return `'${s.replaceAll("'", "''")}'`;
}

/** Writes the chunks with vectored writes (off the event loop), never joining them in memory. */
async function writeChunks(file: string, chunks: readonly Buffer[]): Promise<void> {
  const fh = await fs.open(file, 'w');
  try {
    // writev takes at most IOV_MAX (1024) buffers per call.
    for (let i = 0; i < chunks.length; i += 1024) {
      const part = chunks.slice(i, i + 1024);
      let total = 0;
      for (const c of part) total += c.length;
      const { bytesWritten } = await fh.writev(part);
      if (bytesWritten !== total) await fh.write(Buffer.concat(part).subarray(bytesWritten));
    }
  } finally {
    await fh.close();
  }
}

async function fileIdentity(file: string): Promise<string | undefined> {
  try {
    const st = await fs.stat(file);
    return `${st.dev}:${st.ino}`;
  } catch {
    return undefined;
  }
}

/** Load files left by an earlier process (a crash or a full disk between writing one and removing it). */
async function removeLoadFiles(dir: string): Promise<void> {
  for (const name of await fs.readdir(dir)) {
    if (/^load-\d+-\d+\.ndjson$/.test(name)) await fs.rm(path.join(dir, name), { force: true });
  }
}

/**
 * What no query on this instance may do, set once the file is attached and
 * migrated, then locked: read or write host files (but the store's own load
 * folder, where the write path's batches are read from), reach a URL, or
 * install or load an extension. DuckDB keeps these for the instance's life.
 */
async function lockDown(conn: DuckDBConnection, allowedDirs: readonly string[]): Promise<void> {
  await conn.run(`SET GLOBAL allowed_directories = [${allowedDirs.map(sqlString).join(', ')}]`);
  await conn.run('SET GLOBAL enable_external_access = false');
  await conn.run('SET GLOBAL autoinstall_known_extensions = false');
  await conn.run('SET GLOBAL autoload_known_extensions = false');
  await conn.run('SET GLOBAL lock_configuration = true');
}
