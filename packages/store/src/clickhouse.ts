import { Readable } from 'node:stream';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { clickHouseErrorCode, DATABASE_EXISTS, INCORRECT_DATA, READONLY, REJECTED_CODES, SCHEMA_BEHIND_CODES, SYNTAX_ERROR } from './clickhouse-errors.js';
import { unquoteCosts } from './clickhouse-lines.js';
import { applyClickHouseMigrations, rows, type ClickHouseLogger } from './clickhouse-migrations.js';
import { bindParams, quoteIdentifier } from './clickhouse-sql.js';
import { serverRules, type ServerRules } from './clickhouse-versions.js';
import { applyRetentionTtl } from './clickhouse-retention.js';
import { ClickHouseTopLists } from './clickhouse-top-lists.js';
import { TOP_LISTS_WINDOW_DAYS } from './top-lists.js';
import { addDays, utcDay } from '@trace-ingest/shared/dates';
import {
  ERASE_COLUMN,
  rollupsNaming,
  TEXT_COLUMNS,
  type EraseCounts,
  type EraseTarget,
  type Retention,
  type RetentionCut,
  type RetentionResult,
} from '@trace-ingest/shared/lifecycle';
import type { SpanRow } from '@trace-ingest/shared/rows';
import { inChunks, spanKey, storedSpans, weighted } from './clickhouse-rollups.js';
import { ClickHouseDeriver, DERIVED_TABLES, derivedTable, InProcessLease } from './clickhouse-derive.js';
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

/** The rows of canonical lines (a line the store cannot read is refused whole, as the server would refuse it). */
function parseRows(lines: Lines, rowCount: number): SpanRow[] {
  const rows: SpanRow[] = [];
  if (rowCount === 0) return rows;
  for (const chunk of chunksOf(lines)) {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line === '') continue;
      try {
        rows.push(JSON.parse(line) as SpanRow);
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
  /** The text cut day each org's texts were last emptied up to (in memory: after a restart, the first pass looks at every day). */
  private readonly textMarks = new Map<string, string>();
  readonly topLists: ClickHouseTopLists;
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
        mutate: (table, action) => this.mutate(table, action),
      },
      opts.topListsPerDay,
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

  /**
   * Retention by mutations, which 18.16 and current servers both run: an
   * ALTER ... DELETE of the org's expired days (and their `traces` rows) when
   * any row is there (a count on the sorting key, cheap), and an ALTER ...
   * UPDATE emptying the texts of the days past the text cut. A mutation
   * rewrites the parts holding matching rows, so texts are looked for only
   * in the days since the last cut (a span that arrives already past its
   * text cut is written without texts). The derived rows of the
   * expired days are deleted with them.
   */
  async expire(cut: RetentionCut, _maxRows: number): Promise<RetentionResult> {
    const out: RetentionResult = { deletedRows: 0, emptiedRows: 0, done: true };
    const org = cut.orgId;
    if (cut.rowsBefore !== undefined) {
      const where = bindParams('org_id = ? AND start_date < toDate(?)', [org, utcDay(cut.rowsBefore)]);
      out.deletedRows = await this.countFinal(where);
      if (out.deletedRows > 0) await this.mutate('spans', `DELETE WHERE ${where}`);
      // Every derived row of the expired days goes (traces name customers), whether or not a TTL merge dropped their spans first.
      let derived = 0;
      for (const t of DERIVED_TABLES) {
        const n = await this.count(derivedTable(t), where);
        if (n > 0) await this.mutate(derivedTable(t), `DELETE WHERE ${where}`);
        derived += n;
      }
      if (out.deletedRows + derived > 0) {
        const before = `toDate('${utcDay(cut.rowsBefore)}')`;
        await this.topLists.forget(org, { trace: [`start_date < ${before}`] }, addDays(utcDay(cut.rowsBefore), TOP_LISTS_WINDOW_DAYS));
      }
    }
    if (cut.textsBefore !== undefined) {
      const day = utcDay(cut.textsBefore);
      const since = this.textMarks.get(org);
      if (since !== day) {
        const texts = `(${TEXT_COLUMNS.map((c) => `${c} != ''`).join(' OR ')})`;
        const where = bindParams(`org_id = ? AND start_date < toDate(?)${since === undefined ? '' : ' AND start_date >= toDate(?)'} AND ${texts}`, [
          org,
          day,
          ...(since === undefined ? [] : [since]),
        ]);
        out.emptiedRows = await this.countFinal(where);
        if (out.emptiedRows > 0) await this.mutate('spans', `UPDATE ${TEXT_COLUMNS.map((c) => `${c} = ''`).join(', ')} WHERE ${where}`);
        this.textMarks.set(org, day);
      }
    }
    return out;
  }

  /**
   * Erasure: mutations delete the spans (every copy), the erased traces'
   * derived rows and the derived rows that carry the id (every derivation's);
   * the days it touched are recorded as changed, so the derivation derives
   * them again without the erased spans. It returns once its mutations are
   * done. The counts are of logical rows (the current derivation's).
   */
  async erase(orgId: string, target: EraseTarget, dryRun: boolean): Promise<EraseCounts> {
    const where = bindParams(`org_id = ? AND ${ERASE_COLUMN[target.kind]} = ?`, [orgId, target.id]);
    const traceIds: string[] = [];
    const sessionIds = new Set<string>();
    const days = new Set<string>();
    for await (const r of this.queryStream(
      `SELECT trace_id, groupUniqArray(session_id) AS s, groupUniqArray(toString(start_date)) AS d FROM spans WHERE ${where} GROUP BY trace_id`,
    )) {
      traceIds.push(String(r.trace_id));
      for (const s of r.s as string[]) sessionIds.add(s);
      for (const d of r.d as string[]) days.add(d);
    }
    const named = rollupsNaming(target.kind).map((r) => ({ table: r.table, where: bindParams(`org_id = ? AND ${r.column} = ?`, [orgId, target.id]) }));
    // IN lists of at most 5,000 ids, each within ClickHouse's query size.
    const idsIn = (column: string, ids: readonly string[]) =>
      inChunks(ids, 5000).map((part) => bindParams(`${column} IN (${part.map(() => '?').join(', ')})`, part));
    const traceIn = idsIn('trace_id', traceIds);
    const traceWheres = traceIn.map((w) => `${bindParams('org_id = ?', [orgId])} AND ${w}`);
    let rollupRows = 0;
    for (const w of traceWheres) rollupRows += await this.count('traces', w);
    for (const n of named) rollupRows += await this.count(n.table, n.where);
    const counts = { spans: await this.countFinal(where), traces: traceIds.length, rollupRows };
    if (dryRun) return counts;
    let derivedRows = 0;
    for (const w of traceWheres) derivedRows += await this.count(derivedTable('traces'), w);
    for (const n of named) derivedRows += await this.count(derivedTable(n.table), n.where);
    if (counts.spans + derivedRows === 0) return counts;
    await this.mutate('spans', `DELETE WHERE ${where}`);
    for (const w of traceWheres) await this.mutate(derivedTable('traces'), `DELETE WHERE ${w}`);
    for (const n of named) await this.mutate(derivedTable(n.table), `DELETE WHERE ${n.where}`);
    if (days.size > 0)
      await this.c().command({
        query: `INSERT INTO span_changes (org_id, start_date, rows) VALUES ${[...days].map((d) => bindParams('(?, toDate(?), 1)', [orgId, d])).join(', ')}`,
      });
    await this.topLists.forget(orgId, { trace: traceIn, session: idsIn('session_id', [...sessionIds]) });
    return counts;
  }

  /** Rows of a table or derived view (the views show one derivation's rows, so the figure does not move with merges). */
  private async count(table: string, where: string): Promise<number> {
    const [r] = await this.query(`SELECT count() AS n FROM ${table} WHERE ${where}`);
    return Number(r?.n ?? 0);
  }

  /** Spans matching `where`, one per span. */
  private async countFinal(where: string): Promise<number> {
    const [r] = await this.query(`SELECT count() AS n FROM (SELECT org_id FROM spans FINAL WHERE ${where})`);
    return Number(r?.n ?? 0);
  }

  /**
   * Runs a mutation and waits until the server has applied it (18.16 has no
   * mutations_sync): the mutations of the table that appeared with it, not
   * every mutation of the table.
   */
  private async mutate(table: string, action: string): Promise<void> {
    const ids = async () =>
      (await this.query('SELECT mutation_id AS id FROM system.mutations WHERE database = ? AND table = ?', [this.database, table])).map((r) => String(r.id));
    const before = new Set(await ids());
    await this.c().command({ query: `ALTER TABLE ${table} ${action}` });
    const mine = (await ids()).filter((id) => !before.has(id));
    if (mine.length === 0) return;
    const deadline = Date.now() + (this.opts.mutationTimeoutMs ?? 600_000);
    for (;;) {
      const [r] = await this.query('SELECT count() AS n FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0 AND has(?, mutation_id)', [
        this.database,
        table,
        mine,
      ]);
      if (Number(r?.n ?? 0) === 0) return;
      if (Date.now() > deadline) throw new Error(`a mutation of ${table} did not finish in time; it goes on in the background`);
      await new Promise((res) => setTimeout(res, 100));
    }
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
