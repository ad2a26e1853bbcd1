import fs from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance, StatementType, type DuckDBConnection, type DuckDBValue } from '@duckdb/node-api';
import { SPAN_COLUMNS } from '@trace-ingest/shared/rows';
import { applyDuckDbMigrations, DUCKDB_TYPES, type DuckDbMigrationLogger } from './duckdb-migrations.js';
import {
  chunksOf,
  ReadOnlyQueryError,
  SpanStoreFileError,
  SpanStoreRejectedError,
  SpanStoreSchemaError,
  type Lines,
  type QueryRow,
  type SpanStore,
} from './span-store.js';

// The parts, for callers that need one of them (tests, tools).
export { applyDuckDbMigrations, DUCKDB_TYPES, loadDuckDbMigrations, spansSchemaDrift } from './duckdb-migrations.js';

/** The catalog name the spans file is attached as; queries name the table alone. */
const CATALOG = 'spans_store';
const ROW_GROUP_ROWS = 8192;

const COLUMN_LIST = SPAN_COLUMNS.map(([n]) => `"${n}"`).join(', ');
const READ_JSON_COLUMNS = `{${SPAN_COLUMNS.map(([n, k]) => `'${n}': '${DUCKDB_TYPES[k]}'`).join(', ')}}`;

// A plain INSERT that met a span already stored, or the same span twice in its batch.
const DUPLICATE_KEY = /^Constraint Error: (Duplicate key .* violates primary key constraint|PRIMARY KEY or UNIQUE constraint violation)/;

// Error classes DuckDB raises when the data itself is wrong (retrying cannot help)...
const REJECTED = /^(Conversion Error|Invalid Input Error|Constraint Error|Binder Error|Out of Range Error)/;
// ...except a table or column the file lacks: its schema is behind, which a migration mends.
const INVALIDATED = /has been invalidated/;
const SCHEMA_BEHIND = /^(Binder Error: Table "[^"]*" does not have a column|Catalog Error: Table with name \S+ does not exist)/;

export interface DuckDbSpanStoreOptions {
  file: string;
  /** Where bulk-load files are written; defaults to a folder beside the database. */
  tmpDir?: string;
  /** DuckDB's memory_limit (default: DuckDB's own, 80% of RAM). Too low a limit fails large inserts. */
  memoryLimit?: string | undefined;
  /** DuckDB's worker threads (default: DuckDB's own, one per core). */
  threads?: number | undefined;
  /** Where the migrations applied at start are reported. */
  logger?: DuckDbMigrationLogger | undefined;
  /** The migrations folder (default: the shipped `migrations/duckdb/`); tests give their own. */
  migrationsDir?: URL | undefined;
}

/**
 * The embedded span store: one DuckDB file under DATA_DIR. Rows are bulk
 * loaded from the canonical NDJSON lines with `read_json` (the fastest path
 * measured, ~55k rows/s) and deduplicated by the primary key, so a replayed
 * batch never shows a span twice.
 */
export class DuckDbSpanStore implements SpanStore {
  readonly kind = 'duckdb';
  private instance: DuckDBInstance | undefined;
  private writer: DuckDBConnection | undefined;
  private reader: DuckDBConnection | undefined;
  private readonly tmpDir: string;
  private seq = 0;
  /** The last insert met spans already stored: the next one goes straight to INSERT OR IGNORE. */
  private conflicts = false;
  /** Device and inode of the file opened at start: the path must still lead to it. */
  private identity: string | undefined;
  /** Set while the file is gone from the path. */
  private lost: string | undefined;
  private checking: Promise<void> = Promise.resolve();

  constructor(private readonly opts: DuckDbSpanStoreOptions) {
    this.tmpDir = opts.tmpDir ?? path.join(path.dirname(opts.file), 'tmp');
  }

  async start(): Promise<void> {
    if (this.instance !== undefined) return;
    await fs.mkdir(path.dirname(this.opts.file), { recursive: true });
    await fs.mkdir(this.tmpDir, { recursive: true });
    await removeLoadFiles(this.tmpDir);
    // The largest row the v1 contract allows is under 32 MiB as JSON (four 1M-character texts),
    // which bounds read_json's buffers (maximum_object_size below).
    const settings: Record<string, string> = {};
    if (this.opts.memoryLimit !== undefined) settings.memory_limit = this.opts.memoryLimit;
    if (this.opts.threads !== undefined) settings.threads = String(this.opts.threads);
    // The file is attached to an in-memory instance so it can take ROW_GROUP_SIZE:
    // every checkpoint (one per 16 MB of DuckDB's own log) rewrites the row group
    // being appended to, and at DuckDB's 122,880 rows that group holds hundreds of
    // MB of text: with large spans, inserts slowed to ~1k rows/s as it filled. At
    // 8,192 rows, large spans: 4.7k -> 7.4k rows/s overall, 200 -> 122 us CPU per row.
    const instance = await DuckDBInstance.create(':memory:', settings);
    try {
      const boot = await instance.connect();
      await boot.run(`ATTACH ${sqlString(this.opts.file)} AS ${CATALOG} (ROW_GROUP_SIZE ${ROW_GROUP_ROWS})`);
      boot.closeSync();
      this.writer = await instance.connect();
      this.reader = await instance.connect();
      await this.writer.run(`USE ${CATALOG}`);
      await this.reader.run(`USE ${CATALOG}`);
      await applyDuckDbMigrations(this.writer, this.opts.logger, this.opts.migrationsDir);
    } catch (e) {
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
  private checkFile(): Promise<void> {
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
    await this.start();
    this.lost = undefined;
  }

  problem(): string | undefined {
    return this.lost;
  }

  private conn(which: 'reader' | 'writer'): DuckDBConnection {
    const c = which === 'reader' ? this.reader : this.writer;
    if (c === undefined) throw new Error('span store is not started');
    return c;
  }

  /**
   * A plain INSERT first: DuckDB's ON CONFLICT path cost 98 against 63 us CPU
   * per small row when nothing conflicts, which is nearly always (a span is
   * seen twice only when a client re-sends it or the write log is replayed).
   * A duplicate fails the whole statement, which then runs again as INSERT OR
   * IGNORE: the same rows end up stored either way. While inserts keep
   * meeting duplicates, they go straight to INSERT OR IGNORE.
   */
  async insertLines(lines: Lines, rowCount: number): Promise<void> {
    if (rowCount === 0) return;
    await this.checkFile();
    await this.withLoadFile(lines, async (source) => {
      if (!this.conflicts) {
        try {
          await this.run(`INSERT INTO spans (${COLUMN_LIST}) ${source}`);
          return;
        } catch (e) {
          if (!(e instanceof SpanStoreRejectedError && DUPLICATE_KEY.test(e.message))) throw e;
        }
      }
      const changed = await this.run(`INSERT OR IGNORE INTO spans (${COLUMN_LIST}) ${source}`);
      this.conflicts = changed < rowCount;
    });
    await this.confirmFile();
  }

  /** After a write: the rows went into the file at the path, not into one removed or replaced meanwhile. */
  private async confirmFile(): Promise<void> {
    if ((await fileIdentity(this.opts.file)) !== this.identity) {
      throw new SpanStoreFileError(`the span store file ${this.opts.file} was removed or replaced during an insert; the rows are inserted again`);
    }
  }

  async replaceLines(lines: Lines, rowCount: number): Promise<void> {
    if (rowCount === 0) return;
    await this.checkFile();
    await this.withLoadFile(lines, async (source) => {
      await this.run(`INSERT OR REPLACE INTO spans (${COLUMN_LIST}) ${source}`);
    });
    await this.confirmFile();
  }

  /** Writes the lines to a load file and runs `body` with the SELECT that reads them. */
  private async withLoadFile(lines: Lines, body: (source: string) => Promise<void>): Promise<void> {
    const file = path.join(this.tmpDir, `load-${process.pid}-${++this.seq}.ndjson`);
    try {
      // Made again each time: an operator may have removed the folder while the server ran.
      await fs.mkdir(this.tmpDir, { recursive: true });
      await writeChunks(file, chunksOf(lines));
      await body(
        `SELECT ${COLUMN_LIST} FROM read_json(${sqlString(file)}, format = 'newline_delimited', ` +
          `columns = ${READ_JSON_COLUMNS}, maximum_object_size = 33554432)`,
      );
    } finally {
      await fs.rm(file, { force: true });
    }
  }

  /** Runs a load statement; returns the rows it changed. */
  private async run(sql: string): Promise<number> {
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
   * A checkpoint that failed (a full disk) invalidates the attached file: every
   * later statement fails until it is detached and attached again, which
   * replays DuckDB's own log. Reopened here, so the store recovers by itself
   * once there is room; the failed statement is retried by its caller.
   */
  private async reopenIfInvalidated(msg: string): Promise<void> {
    if (!INVALIDATED.test(msg) || this.instance === undefined) return;
    const reopen = this.checking.then(async () => {
      await this.close();
      await this.start();
    });
    this.checking = reopen.catch(() => undefined);
    await reopen.catch(() => undefined);
  }

  async readOnlyQuery(sql: string, params: readonly unknown[] = []): Promise<QueryRow[]> {
    const conn = this.conn('reader');
    const extracted = await conn.extractStatements(sql);
    if (extracted.count !== 1) throw new ReadOnlyQueryError(`give exactly one statement (got ${extracted.count})`);
    const prepared = await extracted.prepare(0);
    if (prepared.statementType !== StatementType.SELECT && prepared.statementType !== StatementType.EXPLAIN) {
      throw new ReadOnlyQueryError('only SELECT (or EXPLAIN) queries are allowed: the span store is read-only here');
    }
    if (params.length > 0) prepared.bind(params as DuckDBValue[]);
    const reader = await prepared.runAndReadAll();
    return reader.getRowObjectsJson() as QueryRow[];
  }

  async *queryStream(sql: string, params: readonly unknown[] = []): AsyncIterable<QueryRow> {
    if (this.instance === undefined) throw new Error('span store is not started');
    // A connection of its own: another statement on a connection ends the stream running on it,
    // while writes through the writer (reprice replaces rows as it reads) leave this snapshot alone.
    const conn = await this.instance.connect();
    try {
      await conn.run(`USE ${CATALOG}`);
      const result = await conn.stream(sql, params as DuckDBValue[]);
      // One data chunk (up to 2,048 rows) at a time.
      for await (const rows of result.yieldRowObjectJson()) yield* rows as QueryRow[];
    } finally {
      conn.closeSync();
    }
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<QueryRow[]> {
    try {
      const reader = await this.conn('reader').runAndReadAll(sql, params as DuckDBValue[]);
      return reader.getRowObjectsJson() as QueryRow[];
    } catch (e) {
      await this.reopenIfInvalidated(e instanceof Error ? e.message : String(e));
      throw e;
    }
  }
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

function sqlString(s: string): string {
  return `'${s.replaceAll("'", "''")}'`;
}
