import { Readable } from 'node:stream';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { clickHouseErrorCode, DATABASE_EXISTS, INCORRECT_DATA, READONLY, REJECTED_CODES, SCHEMA_BEHIND_CODES, SYNTAX_ERROR } from './clickhouse-errors.js';
import { unquoteCosts } from './clickhouse-lines.js';
import { applyClickHouseMigrations, rows, type ClickHouseLogger } from './clickhouse-migrations.js';
import { bindParams, quoteIdentifier } from './clickhouse-sql.js';
import { serverRules, type ServerRules } from './clickhouse-versions.js';
import { applyRetentionTtl } from './clickhouse-retention.js';
import { ClickHouseLifecycle } from './clickhouse-lifecycle.js';
import { ClickHouseTopLists } from './clickhouse-top-lists.js';
import { type EraseCounts, type EraseTarget, type Retention, type RetentionCut, type RetentionResult } from '@trace-ingest/shared/lifecycle';
import { completeRow, type SpanRow } from '@trace-ingest/shared/rows';
import { spanKey, storedSpans, weighted } from './clickhouse-rollups.js';
import { ClickHouseDeriver, InProcessLease } from './clickhouse-derive.js';
import {
  chunksOf,
  type CostChange,
  ReadOnlyQueryError,
  SpanStoreRejectedError,
  SpanStoreSchemaError,
  type Lines,
  type QueryRow,
  type Lease,
  type SpanStore,
} from './span-store.js';

// The parts, for callers that need one of them (tests, tools).
export { bindParams, quoteIdentifier, quoteString, sqlLiteral } from './clickhouse-sql.js';
export { unquoteCosts } from './clickhouse-lines.js';
export { ddlSettingsFor, needsUnquotedCosts, serverRules } from './clickhouse-versions.js';
export { clickHouseErrorCode } from './clickhouse-errors.js';
export { applyClickHouseMigrations, loadClickHouseMigrations, type ClickHouseExecutor, type ClickHouseLogger } from './clickhouse-migrations.js';
export { splitStatements } from './migration-files.js';

export interface ClickHouseSpanStoreOptions {
  /** e.g. http://default:@127.0.0.1:8123/trace_ingest; the path names the database. */
  url: string;
  requestTimeoutMs?: number;
  logger?: ClickHouseLogger;
  /** How long an erasure or retention waits for its mutations (default 10 minutes). */
  mutationTimeoutMs?: number;
  /** The retention of an org as it stands, written with each row for the TTLs of current servers; none: kept until the retention pass. */
  retentionOf?: ((orgId: string) => Retention | undefined) | undefined;
  /** How many traces (and sessions) a day's top list keeps (default TOP_LISTS_PER_DAY). */
  topListsPerDay?: number | undefined;
  /** Pause between two derivation passes of startBackground (default DERIVE_INTERVAL_MS). */
  deriveIntervalMs?: number | undefined;
}

/** The lease of a store no other process derives. */
const IN_PROCESS = new InProcessLease();
/** Pause between two derivation passes of the server. */
export const DERIVE_INTERVAL_MS = 500;

interface Endpoint {
  url: string;
  username: string;
  password: string;
  database: string;
}

/** Whether a parsed line names its span and times as the canonical form does. */
function identified(r: SpanRow): boolean {
  return (
    typeof r.org_id === 'string' &&
    typeof r.trace_id === 'string' &&
    typeof r.span_id === 'string' &&
    typeof r.parent_span_id === 'string' &&
    Number.isSafeInteger(r.start_time) &&
    Number.isSafeInteger(r.received_at)
  );
}

const ORG_PREFIX = Buffer.from('{"org_id":"');
const [NEWLINE, QUOTE, CLOSE] = [0x0a, 0x22, 0x7d];
/** Lines per chunk of an insert's body (each chunk is one buffer, unquoted as it is sent). */
const LINES_PER_CHUNK = 1000;

/** Where the org id of a canonical line (its first field) ends, or -1 for a line not in that form. */
function orgEnd(line: Buffer): number {
  if (line.length <= ORG_PREFIX.length || line.compare(ORG_PREFIX, 0, ORG_PREFIX.length, 0, ORG_PREFIX.length) !== 0) return -1;
  return line.indexOf(QUOTE, ORG_PREFIX.length);
}

function rawLines(lines: Lines): string[] {
  return chunksOf(lines).flatMap((c) =>
    c
      .toString('utf8')
      .split('\n')
      .filter((l) => l !== ''),
  );
}

/** The rows of lines of either form (a line the store cannot read is refused whole, as the server would refuse it). */
function parseRows(lines: Lines, rowCount: number): SpanRow[] {
  const rows: SpanRow[] = [];
  if (rowCount === 0) return rows;
  for (const chunk of chunksOf(lines)) {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line === '') continue;
      try {
        rows.push(completeRow(JSON.parse(line) as Record<string, unknown>));
      } catch (e) {
        throw new SpanStoreRejectedError(`a row is not JSON: ${(e as Error).message}`, { cause: e });
      }
    }
  }
  return rows;
}

function parseUrl(raw: string): Endpoint {
  const u = new URL(raw);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`CLICKHOUSE_URL must be http(s)://, got ${u.protocol}`);
  const database = decodeURIComponent(u.pathname.replace(/^\/+|\/+$/g, '')) || 'default';
  quoteIdentifier(database);
  return { url: `${u.protocol}//${u.host}`, username: decodeURIComponent(u.username) || 'default', password: decodeURIComponent(u.password), database };
}

/**
 * Spans in ClickHouse, one JSONEachRow insert per flush (ClickHouse prefers
 * few large inserts). The canonical lines go to the server as they are (on
 * 18.x with the cost quotes dropped). Retried inserts write copies that
 * ReplacingMergeTree collapses: read `FROM spans FINAL` for one row per span.
 */
export class ClickHouseSpanStore implements SpanStore {
  readonly kind = 'clickhouse';
  readonly rollups = true;
  readonly database: string;
  private readonly endpoint: Endpoint;
  private client: ClickHouseClient | undefined;
  /** The rules of the connected server's version, known after start(). */
  private rules: ServerRules = serverRules('');
  readonly topLists: ClickHouseTopLists;
  private readonly lifecycle: ClickHouseLifecycle;
  readonly deriver: ClickHouseDeriver;
  private timer: NodeJS.Timeout | undefined;
  private lease: Lease | undefined;
  private background: Promise<unknown> = Promise.resolve();

  constructor(private readonly opts: ClickHouseSpanStoreOptions) {
    this.endpoint = parseUrl(opts.url);
    this.database = this.endpoint.database;
    this.topLists = new ClickHouseTopLists(
      {
        query: (sql) => this.query(sql),
        command: async (sql) => void (await this.c().command({ query: sql })),
        mutate: (table, action) => this.lifecycle.mutate(table, action),
      },
      opts.topListsPerDay,
    );
    this.lifecycle = new ClickHouseLifecycle(
      {
        query: (sql, params) => this.query(sql, params),
        queryStream: (sql) => this.queryStream(sql),
        command: async (sql) => void (await this.c().command({ query: sql })),
        database: this.database,
        mutationTimeoutMs: opts.mutationTimeoutMs,
      },
      this.topLists,
    );
    this.deriver = new ClickHouseDeriver(
      { query: (sql) => this.query(sql), command: async (sql) => void (await this.c().command({ query: sql })) },
      { hold: () => (this.lease ?? IN_PROCESS).hold(), close: async () => undefined },
      this.topLists,
    );
  }

  private connect(database: string): ClickHouseClient {
    return createClient({
      url: this.endpoint.url,
      username: this.endpoint.username,
      password: this.endpoint.password,
      database,
      request_timeout: this.opts.requestTimeoutMs ?? 30_000,
      // Server errors are thrown to the caller, who decides what to log.
      log: { level: ClickHouseLogLevel.OFF },
      // Int64 sums and epoch ms fit a double; quoted they would come back as strings.
      clickhouse_settings: { output_format_json_quote_64bit_integers: 0 },
    });
  }

  async start(): Promise<void> {
    if (this.client !== undefined) return;
    // The target database may not exist yet, and a client cannot connect to it until it does.
    const admin = this.connect('system');
    try {
      const [found] = await rows<{ n: number | string }>(admin, bindParams('SELECT count() AS n FROM system.databases WHERE name = ?', [this.database]));
      if (Number(found?.n) !== 1) {
        try {
          await admin.command({ query: `CREATE DATABASE IF NOT EXISTS ${quoteIdentifier(this.database)}` });
        } catch (e) {
          if (clickHouseErrorCode(e) !== DATABASE_EXISTS) throw e;
        }
      }
    } finally {
      await admin.close();
    }
    const client = this.connect(this.database);
    try {
      await applyClickHouseMigrations(client, this.database, this.opts.logger);
      const [v] = await rows<{ v: string }>(client, 'SELECT version() AS v');
      this.rules = serverRules(v?.v ?? '');
      await applyRetentionTtl(client, v?.v ?? '');
    } catch (e) {
      await client.close();
      throw e;
    }
    this.client = client;
  }

  /** Derives in the background (the server): a pass every deriveIntervalMs while `lease` (none: this process alone) is held. */
  startBackground(lease: Lease | undefined): void {
    if (this.client === undefined || this.timer !== undefined) return;
    this.lease = lease;
    this.schedule(this.opts.deriveIntervalMs ?? DERIVE_INTERVAL_MS);
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.background = this.deriver
        .pass()
        .catch((e: unknown) => this.opts.logger?.warn({ err: errorText(e) }, 'ClickHouse derivation pass failed; the next pass retries'))
        .finally(() => {
          if (this.client !== undefined) this.schedule(ms);
        });
    }, ms);
    this.timer.unref();
  }

  /** Derives every changed day now (a test's or a tool's wait for the derived tables; needs the lease). */
  settle(): Promise<void> {
    return this.deriver.settle();
  }

  /** The (org, day)s whose derived rows do not yet reflect every stored span (a read). */
  pendingDerivation(orgId?: string): Promise<{ org: string; day: string }[]> {
    return this.deriver.pending(orgId);
  }

  async rollupsBehind(orgId: string, day: string): Promise<boolean> {
    return (await this.deriver.pending(orgId)).some((p) => p.day === day);
  }

  async close(): Promise<void> {
    clearTimeout(this.timer);
    await this.background;
    await this.lease?.close();
    const c = this.client;
    this.client = undefined;
    await c?.close();
  }

  private c(): ClickHouseClient {
    if (this.client === undefined) throw new Error('ClickHouse span store is not started');
    return this.client;
  }

  async ping(): Promise<void> {
    const r = await this.c().ping();
    if (!r.success) throw r.error;
  }

  /**
   * Appends the lines as they are (the spans table keeps one row per span):
   * no read, so replicas flushing the same spans at once store them once
   * and the derived tables, derived from the distinct spans, count them once.
   */
  async insertLines(lines: Lines, rowCount: number): Promise<void> {
    if (rowCount === 0) return;
    // Byte slices of the lines as they came, each closed with its org's extra fields: no line is decoded or encoded again.
    const chunks: Buffer[] = [];
    let pieces: Buffer[] = [];
    let count = 0;
    let org = Buffer.alloc(0);
    let extra = Buffer.from(`,"rollup_weight":1}\n`);
    const plain = Buffer.from('\n');
    for (const chunk of chunksOf(lines)) {
      for (let pos = 0; pos < chunk.length;) {
        let nl = chunk.indexOf(NEWLINE, pos);
        if (nl < 0) nl = chunk.length;
        if (nl > pos) {
          const line = chunk.subarray(pos, nl);
          const end = line[line.length - 1] === CLOSE ? orgEnd(line) : -1;
          if (end < 0) pieces.push(line, plain);
          else {
            if (org.length !== end - ORG_PREFIX.length || line.compare(org, 0, org.length, ORG_PREFIX.length, end) !== 0) {
              org = Buffer.from(line.subarray(ORG_PREFIX.length, end));
              extra = Buffer.from(`,"rollup_weight":1${this.retentionFields(org.toString('utf8'))}}\n`);
            }
            pieces.push(line.subarray(0, line.length - 1), extra);
          }
          if (++count % LINES_PER_CHUNK === 0) {
            chunks.push(Buffer.concat(pieces));
            pieces = [];
          }
        }
        pos = nl + 1;
      }
    }
    if (pieces.length > 0) chunks.push(Buffer.concat(pieces));
    await this.insertChunks(chunks);
  }

  /** Rows that replace the stored rows of the same spans: new versions, which the derivation takes up. */
  async replaceLines(lines: Lines, rowCount: number): Promise<void> {
    const rows = parseRows(lines, rowCount);
    if (rows.length === 0) return;
    if (!rows.every(identified)) return this.insertRaw(rawLines(lines));
    const now = Date.now();
    await this.insertRaw(rows.map((r) => weighted({ ...r, received_at: Math.max(now, r.received_at + 1) }, 1, this.retentionFields(r.org_id))));
  }

  /** New costs for stored spans: each span written again with them (a newer version). */
  async updateCosts(changes: readonly CostChange[]): Promise<void> {
    if (changes.length === 0) return;
    const byKey = new Map(changes.map((c) => [spanKey(c), c]));
    const now = Date.now();
    const out: string[] = [];
    for (const row of await storedSpans((sql) => this.read(sql), changes)) {
      const c = byKey.get(spanKey(row));
      if (c === undefined) continue;
      const { org_id: _o, trace_id: _t, span_id: _s, start_time: _st, ...costs } = c;
      out.push(weighted({ ...row, ...costs, received_at: Math.max(now, row.received_at + 1) }, 1, this.retentionFields(row.org_id)));
    }
    await this.insertRaw(out);
  }

  /** The org's retention as extra fields of its rows' lines. */
  private retentionFields(orgId: string): string {
    const r = this.opts.retentionOf?.(orgId);
    if (r === undefined) return '';
    const days = (n: number) => Math.min(Math.max(Math.trunc(n), 0), 65_535);
    return `,"retention_days":${days(r.days)},"text_days":${days(r.textDays)}`;
  }

  /** A read on the insert path: a table or column the database lacks is the schema behind (retryable). */
  private async read(sql: string): Promise<QueryRow[]> {
    try {
      return await this.query(sql);
    } catch (e) {
      const code = clickHouseErrorCode(e, this.rules.typedErrors);
      if (code !== undefined && SCHEMA_BEHIND_CODES.has(code)) throw new SpanStoreSchemaError((e as Error).message.split('\n')[0] ?? '', { cause: e });
      throw e;
    }
  }

  /** One JSONEachRow insert of these lines. */
  private async insertRaw(lines: readonly string[]): Promise<void> {
    const chunks: Buffer[] = [];
    for (let i = 0; i < lines.length; i += LINES_PER_CHUNK) chunks.push(Buffer.from(lines.slice(i, i + LINES_PER_CHUNK).join('\n') + '\n'));
    await this.insertChunks(chunks);
  }

  /**
   * Inserts chunks of JSONEachRow lines, unquoted one at a time as the request
   * body is sent, so a large insert never holds the event loop for the whole of it.
   */
  private async insertChunks(chunks: readonly Buffer[]): Promise<void> {
    if (chunks.length === 0) return;
    const unquote = this.rules.unquoteCosts;
    const body = (function* () {
      for (const c of chunks) yield unquote ? unquoteCosts(c) : c;
    })();
    try {
      const res = await this.c().exec({ query: 'INSERT INTO spans FORMAT JSONEachRow', values: Readable.from(body, { objectMode: false }) });
      // The server confirms the insert by ending the (empty) response.
      await new Promise<void>((resolve, reject) => res.stream.once('end', resolve).once('error', reject).resume());
    } catch (e) {
      const code = clickHouseErrorCode(e, this.rules.typedErrors);
      const first = (e as Error).message.split('\n')[0] ?? '';
      if (code !== undefined && SCHEMA_BEHIND_CODES.has(code)) throw new SpanStoreSchemaError(first, { cause: e });
      // Our own encoder writes every field, so an unknown one means a column the table lacks.
      if (code === INCORRECT_DATA && /unknown field/i.test(first)) throw new SpanStoreSchemaError(first, { cause: e });
      if (code !== undefined && REJECTED_CODES.has(code))
        throw new SpanStoreRejectedError(`ClickHouse refused the rows: ${(e as Error).message.split('\n')[0] ?? ''}`, { cause: e });
      throw e;
    }
  }

  expire(cut: RetentionCut, maxRows: number): Promise<RetentionResult> {
    return this.lifecycle.expire(cut, maxRows);
  }

  erase(orgId: string, target: EraseTarget, dryRun: boolean): Promise<EraseCounts> {
    return this.lifecycle.erase(orgId, target, dryRun);
  }

  async disk(): Promise<{ usedBytes: number; freeBytes: number | undefined }> {
    const [r] = await this.query('SELECT sum(bytes) AS n FROM system.parts WHERE database = ? AND active', [this.database]);
    // system.disks came after 18.16: there, the server's free space is not known here.
    const free = await this.query("SELECT free_space AS f FROM system.disks WHERE name = 'default'").catch(() => []);
    return { usedBytes: Number(r?.n ?? 0), freeBytes: free[0] === undefined ? undefined : Number(free[0].f) };
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<QueryRow[]> {
    return rows<QueryRow>(this.c(), bindParams(sql, params));
  }

  async *queryStream(sql: string, params: readonly unknown[] = []): AsyncIterable<QueryRow> {
    const rs = await this.c().query({ query: bindParams(sql, params), format: 'JSONEachRow' });
    const stream = rs.stream<QueryRow>();
    try {
      // Each chunk holds the rows of one network read; the next is read when these are used up.
      for await (const chunk of stream) for (const row of chunk) yield row.json();
    } finally {
      // Stopping early closes the response instead of reading it to its end.
      if (!stream.readableEnded) stream.destroy();
    }
  }

  /**
   * An ad-hoc query (`trace-ingest sql`) under readonly=1, which on 18.16
   * refuses every write, SET and table function (url, remote, file, s3,
   * numbers...), and run as the subquery of a SELECT, so the server parses
   * nothing but a query: readonly=1 lets KILL QUERY through, which a subquery
   * cannot be. The server stops reading at maxRows.
   */
  async readOnlyQuery(sql: string, params: readonly unknown[] = [], maxRows?: number): Promise<QueryRow[]> {
    try {
      const limit = maxRows === undefined ? {} : { max_result_rows: String(maxRows), result_overflow_mode: 'break' as const };
      // The line break keeps a trailing -- comment from swallowing the parenthesis.
      const query = `SELECT * FROM (\n${bindParams(sql, params).replace(/;\s*$/, '')}\n)`;
      const rs = await this.c().query({ query, format: 'JSONEachRow', clickhouse_settings: { readonly: '1', ...limit } });
      const rows = await rs.json<QueryRow>();
      // The server stops at a block boundary past the limit.
      return maxRows === undefined ? rows : rows.slice(0, maxRows);
    } catch (e) {
      if (clickHouseErrorCode(e, this.rules.typedErrors) === READONLY) throw new ReadOnlyQueryError(`only queries that read are allowed here: ${errorText(e)}`);
      if (clickHouseErrorCode(e, this.rules.typedErrors) === SYNTAX_ERROR)
        throw new ReadOnlyQueryError(`give one SELECT: the span store is read-only here (${errorText(e)})`);
      throw e;
    }
  }
}

/** The first line of a server's error, for a message. */
function errorText(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0] ?? '';
}
