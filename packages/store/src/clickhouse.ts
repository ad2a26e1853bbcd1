import fs from 'node:fs/promises';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { ReadOnlyQueryError, SpanStoreRejectedError, type QueryRow, type SpanStore } from './span-store.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/clickhouse/', import.meta.url));

/**
 * LowCardinality is experimental, and gated by a setting, before 19.x; servers
 * from 24.x on refuse that setting as unknown, so it is sent only to old ones.
 */
export function ddlSettingsFor(serverVersion: string): Record<string, 1> {
  const major = Number.parseInt(serverVersion, 10);
  return Number.isFinite(major) && major < 19 ? { allow_experimental_low_cardinality_type: 1 } : {};
}

// Error codes for data the server will never accept (parse and type errors):
// retrying cannot help, so the rows are dead-lettered.
const REJECTED_CODES = new Set(['6', '26', '27', '38', '41', '53', '62', '69', '70', '72', '117', '130', '131', '321', '354']);

// 18.16 reads Decimal only from a bare JSON number; the canonical line carries
// costs as strings so no float ever touches them. Unquote exactly those keys:
// inside a JSON string a quote is escaped, so the pattern cannot match text.
const QUOTED_COSTS = /"((?:input|output|reasoning|cached_input|cache_write_input|image|web_search|request|total)_cost)":"(-?\d+(?:\.\d+)?)"/g;

export function unquoteCosts(lines: string): string {
  return lines.replace(QUOTED_COSTS, '"$1":$2');
}

/** A SQL string literal; every value that reaches SQL goes through this or `bindParams`. */
export function quoteString(s: string): string {
  let out = "'";
  for (const ch of s) {
    if (ch === "'") out += "\\'";
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\0') out += '\\0';
    else out += ch;
  }
  return out + "'";
}

function literal(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`cannot bind ${v}`);
    return String(v);
  }
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'boolean') return v ? '1' : '0';
  if (typeof v === 'string') return quoteString(v);
  if (v instanceof Date) return quoteString(v.toISOString().slice(0, 19).replace('T', ' '));
  if (Array.isArray(v)) return `[${v.map(literal).join(', ')}]`;
  throw new Error(`cannot bind a value of type ${typeof v}`);
}

/**
 * Binds `?` placeholders (outside quoted text) to escaped literals. 18.16 has
 * no server-side query parameters, so this is the one place values enter SQL.
 */
export function bindParams(sql: string, params: readonly unknown[]): string {
  let out = '';
  let i = 0;
  let quote: string | null = null;
  for (let k = 0; k < sql.length; k++) {
    const ch = sql[k] as string;
    if (quote !== null) {
      out += ch;
      if (ch === '\\') out += sql[++k] ?? '';
      else if (ch === quote) quote = null;
      continue;
    }
    if (ch === "'" || ch === '"' || ch === '`') quote = ch;
    if (ch === '?') {
      if (i >= params.length) throw new Error(`query has more placeholders than the ${params.length} parameter(s) given`);
      out += literal(params[i++]);
      continue;
    }
    out += ch;
  }
  if (i !== params.length) throw new Error(`query has ${i} placeholder(s) but ${params.length} parameter(s) were given`);
  return out;
}

function databaseOf(url: URL): string {
  const db = decodeURIComponent(url.pathname.replace(/^\/+|\/+$/g, ''));
  if (db === '') return 'default';
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(db)) throw new Error(`CLICKHOUSE_URL database name "${db}" must match [A-Za-z_][A-Za-z0-9_]*`);
  return db;
}

export const MIGRATIONS_TABLE_DDL = 'CREATE TABLE IF NOT EXISTS schema_migrations (version String, applied_at DateTime) ENGINE = MergeTree ORDER BY version';

/** The versioned migrations in order, each split into statements. */
export async function clickHouseMigrations(): Promise<{ version: string; statements: string[] }[]> {
  const files = (await fs.readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
  const out: { version: string; statements: string[] }[] = [];
  for (const file of files) {
    const text = await fs.readFile(MIGRATIONS_DIR + file, 'utf8');
    const statements = text
      .split(/;\s*(?:\n|$)/)
      .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
      .filter(Boolean);
    out.push({ version: file.replace(/\.sql$/, ''), statements });
  }
  return out;
}

/** Applies migrations/clickhouse/*.sql not yet recorded in `schema_migrations`; safe to run concurrently. */
export async function applyClickHouseMigrations(client: ClickHouseClient): Promise<string[]> {
  await client.command({ query: MIGRATIONS_TABLE_DDL });
  const rs = await client.query({ query: 'SELECT DISTINCT version FROM schema_migrations', format: 'JSONEachRow' });
  const applied = new Set((await rs.json<{ version: string }>()).map((r) => r.version));
  const vs = await client.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' });
  const settings = ddlSettingsFor((await vs.json<{ v: string }>())[0]?.v ?? '');
  const done: string[] = [];
  for (const { version, statements } of await clickHouseMigrations()) {
    if (applied.has(version)) continue;
    // Every statement is idempotent (IF NOT EXISTS), so two replicas applying at once both succeed.
    for (const stmt of statements) {
      await client.command({ query: stmt, clickhouse_settings: settings });
    }
    await client.command({ query: `INSERT INTO schema_migrations (version, applied_at) VALUES (${quoteString(version)}, now())` });
    done.push(version);
  }
  return done;
}

export interface ClickHouseSpanStoreOptions {
  /** e.g. http://default:@127.0.0.1:8123/trace_ingest; the path names the database. */
  url: string;
  requestTimeoutMs?: number;
}

/**
 * Spans in ClickHouse. Rows are sent as the canonical NDJSON lines in one
 * JSONEachRow insert per flush (ClickHouse prefers few large inserts);
 * ReplacingMergeTree collapses replays, so a query with FINAL sees each span once.
 */
export class ClickHouseSpanStore implements SpanStore {
  readonly kind = 'clickhouse';
  private client: ClickHouseClient | undefined;
  readonly database: string;
  private readonly serverUrl: string;
  private readonly username: string;
  private readonly password: string;

  constructor(private readonly opts: ClickHouseSpanStoreOptions) {
    const u = new URL(opts.url);
    this.database = databaseOf(u);
    this.username = decodeURIComponent(u.username) || 'default';
    this.password = decodeURIComponent(u.password);
    this.serverUrl = `${u.protocol}//${u.host}`;
  }

  private make(database: string): ClickHouseClient {
    return createClient({
      url: this.serverUrl,
      username: this.username,
      password: this.password,
      database,
      request_timeout: this.opts.requestTimeoutMs ?? 30_000,
      compression: { request: false, response: false },
      log: { level: ClickHouseLogLevel.OFF },
      clickhouse_settings: { output_format_json_quote_64bit_integers: 0, input_format_skip_unknown_fields: 0 },
    });
  }

  async start(): Promise<void> {
    if (this.client !== undefined) return;
    const admin = this.make('default');
    try {
      await admin.command({ query: `CREATE DATABASE IF NOT EXISTS ${this.database}` });
    } finally {
      await admin.close();
    }
    const client = this.make(this.database);
    try {
      await applyClickHouseMigrations(client);
    } catch (e) {
      await client.close();
      throw e;
    }
    this.client = client;
  }

  async close(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    await c?.close();
  }

  private c(): ClickHouseClient {
    if (this.client === undefined) throw new Error('span store is not started');
    return this.client;
  }

  async ping(): Promise<void> {
    const r = await this.c().ping();
    if (!r.success) throw r.error;
  }

  async insertLines(lines: Buffer, rowCount: number): Promise<void> {
    if (rowCount === 0) return;
    const body = unquoteCosts(lines.toString('utf8'));
    try {
      const res = await this.c().exec({ query: 'INSERT INTO spans FORMAT JSONEachRow', values: Readable.from([body]) });
      // The insert is confirmed once the (empty) response is read to its end.
      await new Promise<void>((resolve, reject) => res.stream.once('end', resolve).once('error', reject).resume());
    } catch (e) {
      const code = (e as { code?: string }).code ?? /^Code: (\d+)/.exec((e as Error).message)?.[1];
      if (code !== undefined && REJECTED_CODES.has(code)) throw new SpanStoreRejectedError((e as Error).message, { cause: e });
      throw e;
    }
  }

  async replaceLines(lines: Buffer, rowCount: number): Promise<void> {
    // ReplacingMergeTree keeps the row with the greatest received_at: a newer copy replaces.
    return this.insertLines(lines, rowCount);
  }

  async readOnlyQuery(sql: string, params: readonly unknown[] = []): Promise<QueryRow[]> {
    try {
      // readonly=2: the server refuses any write, but the client may still set output settings.
      const rs = await this.c().query({ query: bindParams(sql, params), format: 'JSONEachRow', clickhouse_settings: { readonly: '2' } });
      return await rs.json<QueryRow>();
    } catch (e) {
      const code = (e as { code?: string }).code ?? /^Code: (\d+)/.exec((e as Error).message)?.[1];
      if (code === '164') throw new ReadOnlyQueryError('only read queries are allowed: the span store is read-only here');
      throw e;
    }
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<QueryRow[]> {
    const rs = await this.c().query({ query: bindParams(sql, params), format: 'JSONEachRow' });
    return rs.json<QueryRow>();
  }
}
