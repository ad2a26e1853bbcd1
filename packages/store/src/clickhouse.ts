import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import { Readable } from 'node:stream';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { chunksOf, ReadOnlyQueryError, SpanStoreRejectedError, type Lines, type QueryRow, type SpanStore } from './span-store.js';

// The same relative path from src/ and from dist/.
const MIGRATIONS_DIR = new URL('../../../migrations/clickhouse/', import.meta.url);

export interface ClickHouseLogger {
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface ClickHouseSpanStoreOptions {
  /** e.g. http://default:@127.0.0.1:8123/trace_ingest; the path names the database. */
  url: string;
  requestTimeoutMs?: number;
  logger?: ClickHouseLogger;
}

// ---------------------------------------------------------------------------
// Values into SQL. 18.16 has no server-side query parameters, so every value
// that reaches a statement goes through `sqlLiteral`.

/** A ClickHouse string literal. Backslash escapes, so `\` and `'` cannot end it early. */
export function quoteString(s: string): string {
  let out = "'";
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let esc: string | undefined;
    if (c === 0x27) esc = "\\'";
    else if (c === 0x5c) esc = '\\\\';
    else if (c < 0x20 || c === 0x7f) esc = c === 0x0a ? '\\n' : c === 0x0d ? '\\r' : c === 0x09 ? '\\t' : c === 0 ? '\\0' : `\\x${c.toString(16).padStart(2, '0')}`;
    if (esc !== undefined) {
      out += s.slice(from, i) + esc;
      from = i + 1;
    }
  }
  return out + s.slice(from) + "'";
}

/** A backquoted identifier, for names the service itself chooses (database names). */
export function quoteIdentifier(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`not a plain identifier: ${JSON.stringify(name)}`);
  return '`' + name + '`';
}

/**
 * One bound value as SQL. Negative numbers are parenthesised so that `x-?`
 * never turns into a `--` comment; dates become epoch ms like the table's times.
 */
export function sqlLiteral(v: unknown): string {
  if (v === null) return 'NULL';
  switch (typeof v) {
    case 'string':
      return quoteString(v);
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`cannot bind ${v}`);
      return v < 0 || Object.is(v, -0) ? `(${v})` : String(v);
    case 'bigint':
      return v < 0n ? `(${v})` : String(v);
    case 'boolean':
      return v ? '1' : '0';
    default:
      if (Array.isArray(v)) return `[${v.map(sqlLiteral).join(', ')}]`;
      if (v instanceof Date) {
        const ms = v.getTime();
        if (!Number.isFinite(ms)) throw new TypeError('cannot bind an invalid Date');
        return sqlLiteral(ms);
      }
      throw new TypeError(`cannot bind a value of type ${v === undefined ? 'undefined' : typeof v}`);
  }
}

/**
 * Replaces each `?` placeholder with the escaped literal of the next param.
 * A `?` inside a string literal, a quoted identifier or a comment is text,
 * not a placeholder. The counts must match exactly.
 */
export function bindParams(sql: string, params: readonly unknown[] = []): string {
  let out = '';
  let from = 0;
  let n = 0;
  const len = sql.length;
  for (let i = 0; i < len; i++) {
    const ch = sql[i];
    if (ch === "'" || ch === '"' || ch === '`') {
      // Quoted text ends at the next unescaped quote; a doubled quote is an escape too
      // and is handled by leaving and re-entering.
      i++;
      while (i < len && sql[i] !== ch) i += sql[i] === '\\' ? 2 : 1;
      if (i >= len) throw new Error(`unterminated ${ch} in query`);
    } else if (ch === '-' && sql[i + 1] === '-') {
      const nl = sql.indexOf('\n', i);
      i = nl < 0 ? len : nl;
    } else if (ch === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2);
      if (end < 0) throw new Error('unterminated /* comment in query');
      i = end + 1;
    } else if (ch === '?') {
      if (n >= params.length) throw new Error(`query has more ? placeholders than the ${params.length} parameter(s) given`);
      out += sql.slice(from, i) + sqlLiteral(params[n++]);
      from = i + 1;
    }
  }
  if (n !== params.length) throw new Error(`query has ${n} ? placeholder(s) but ${params.length} parameter(s) were given`);
  return out + sql.slice(from);
}

// ---------------------------------------------------------------------------
// The canonical line form on old servers.

// In table order, as encodeRow writes them: contiguous, `"<name>":"<decimal>"`.
const COST_KEYS = ['input_cost', 'output_cost', 'reasoning_cost', 'cached_input_cost', 'cache_write_input_cost', 'image_cost', 'web_search_cost', 'request_cost', 'total_cost'].map((c) => Buffer.from(`"${c}":"`));
const FIRST_COST = COST_KEYS[0] as Buffer;
const QUOTE = 0x22;
const COMMA = 0x2c;
const NEWLINE = 0x0a;

function bytesAt(buf: Buffer, at: number, want: Buffer): boolean {
  if (at + want.length > buf.length) return false;
  for (let i = 0; i < want.length; i++) if (buf[at + i] !== want[i]) return false;
  return true;
}

/**
 * 18.x reads a Decimal only from a bare JSON number, while the canonical line
 * carries costs as strings (no float ever touches money). Drops the quotes
 * around the nine cost values of each line and touches nothing else.
 *
 * A match is structural: in JSON text an unescaped `":"` only follows a key,
 * and only column names are keys, so no string value can fake one. Per line it
 * costs one native search for the first cost key, a short byte walk over the
 * nine costs, and one memchr to the newline (JSON text has no raw newline
 * inside strings): the long text columns are never walked in JS.
 */
export function unquoteCosts(lines: Buffer): Buffer;
export function unquoteCosts(lines: string): string;
export function unquoteCosts(lines: Buffer | string): Buffer | string {
  if (typeof lines === 'string') return unquoteCosts(Buffer.from(lines, 'utf8')).toString('utf8');
  const cuts: number[] = [];
  const len = lines.length;
  let pos = 0;
  while (pos < len) {
    const at = lines.indexOf(FIRST_COST, pos);
    if (at < 0) break;
    let p = at;
    for (let k = 0; k < COST_KEYS.length; k++) {
      const key = COST_KEYS[k] as Buffer;
      if (k > 0) {
        if (lines[p] !== COMMA) break;
        p++;
      }
      if (!bytesAt(lines, p, key)) break;
      const open = p + key.length - 1;
      let q = open + 1;
      if (lines[q] === 0x2d) q++;
      const digits = q;
      for (let b = lines[q]; b !== undefined && ((b >= 0x30 && b <= 0x39) || b === 0x2e); b = lines[++q]);
      if (q === digits || lines[q] !== QUOTE) break;
      cuts.push(open, q);
      p = q + 1;
    }
    const nl = lines.indexOf(NEWLINE, p);
    pos = nl < 0 ? len : nl + 1;
  }
  if (cuts.length === 0) return lines;
  const out = Buffer.allocUnsafe(len - cuts.length);
  let w = 0;
  let from = 0;
  for (const cut of cuts) {
    // Between two quotes of one line lie a few bytes: a native copy per gap costs more than the bytes.
    if (cut - from < 64) while (from < cut) out[w++] = lines[from++] as number;
    else w += lines.copy(out, w, from, cut);
    from = cut + 1;
  }
  lines.copy(out, w, from);
  return out;
}

// ---------------------------------------------------------------------------
// Server generations.

function majorVersion(version: string): number {
  const major = Number.parseInt(version, 10);
  return Number.isFinite(major) ? major : Number.POSITIVE_INFINITY;
}

/**
 * Settings the migrations need on a server of this version. LowCardinality is
 * experimental and gated before 19.x/20.x; current servers refuse the setting
 * as unknown, so only old ones get it.
 */
export function ddlSettingsFor(serverVersion: string): Record<string, 0 | 1> {
  return majorVersion(serverVersion) < 20 ? { allow_experimental_low_cardinality_type: 1 } : {};
}

/** Whether a server of this version needs cost strings unquoted before JSONEachRow insert. */
export function needsUnquotedCosts(serverVersion: string): boolean {
  return majorVersion(serverVersion) < 20;
}

// ---------------------------------------------------------------------------
// Errors.

/** The server's numeric error code of a failed request, when it answered at all. */
export function clickHouseErrorCode(e: unknown): number | undefined {
  if (typeof e !== 'object' || e === null) return undefined;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && /^\d+$/.test(code)) return Number(code);
  const message = (e as { message?: unknown }).message;
  // 18.16 words its errors "Code: 27, e.displayText() = ...", which the client does not parse.
  const m = typeof message === 'string' ? /^Code: (\d+)[,.]/.exec(message) : null;
  return m === null ? undefined : Number(m[1]);
}

// Codes that mean the data itself will never be accepted: parse and type errors,
// values out of range. Not here on purpose: unknown table/column (a migration
// away from working), memory and timeouts (may pass on retry).
const REJECTED_CODES = new Set([
  6, // CANNOT_PARSE_TEXT
  25, // CANNOT_PARSE_ESCAPE_SEQUENCE
  26, // CANNOT_PARSE_QUOTED_STRING
  27, // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  38, // CANNOT_PARSE_DATE
  41, // CANNOT_PARSE_DATETIME
  53, // TYPE_MISMATCH
  69, // ARGUMENT_OUT_OF_BOUND (a Decimal too big or too precise)
  70, // CANNOT_CONVERT_TYPE
  72, // CANNOT_PARSE_NUMBER
  117, // INCORRECT_DATA (an unknown field in JSONEachRow)
  130, // CANNOT_READ_ARRAY_FROM_TEXT
  131, // TOO_LARGE_STRING_SIZE
  321, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
  349, // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
  407, // DECIMAL_OVERFLOW
  467, // CANNOT_PARSE_BOOL
]);

const ALREADY_EXISTS_CODES = new Set([
  15, // DUPLICATE_COLUMN: ALTER ... ADD COLUMN has no IF NOT EXISTS on 18.16
  57, // TABLE_ALREADY_EXISTS: a concurrent CREATE ... IF NOT EXISTS may still lose the race
  82, // DATABASE_ALREADY_EXISTS
]);

// ---------------------------------------------------------------------------
// Migrations.

export interface ClickHouseMigration {
  /** The file name without `.sql`, e.g. `0001_spans`. */
  version: string;
  checksum: string;
  statements: string[];
}

/** Splits a migration file into statements: `;` at a line's end ends one; `--` lines are dropped. */
export function splitStatements(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => !l.trimStart().startsWith('--'))
    .join('\n')
    .split(/;[ \t]*(?:\r?\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The versioned migrations of `migrations/clickhouse/`, in order. */
export async function loadClickHouseMigrations(dir: URL = MIGRATIONS_DIR): Promise<ClickHouseMigration[]> {
  const files = (await fs.readdir(dir)).filter((f) => /^\d+_[A-Za-z0-9_]+\.sql$/.test(f)).sort();
  const out: ClickHouseMigration[] = [];
  for (const file of files) {
    const text = await fs.readFile(new URL(file, dir), 'utf8');
    out.push({ version: file.slice(0, -4), checksum: createHash('sha256').update(text).digest('hex'), statements: splitStatements(text) });
  }
  return out;
}

export const MIGRATIONS_TABLE_DDL =
  'CREATE TABLE IF NOT EXISTS schema_migrations (version String, checksum String, applied_at DateTime) ENGINE = ReplacingMergeTree() ORDER BY version';

/**
 * What the migration runner needs from a connection: an @clickhouse/client
 * client, or anything else that speaks SQL to ClickHouse (chdb in the tests).
 */
export interface ClickHouseExecutor {
  command(params: { query: string; clickhouse_settings?: Record<string, 0 | 1> }): Promise<unknown>;
  query(params: { query: string; format: 'JSONEachRow' }): Promise<{ json<T>(): Promise<T[]> }>;
}

async function rows<T>(client: ClickHouseExecutor, query: string): Promise<T[]> {
  const rs = await client.query({ query, format: 'JSONEachRow' });
  return rs.json<T>();
}

/**
 * Applies the migrations not yet recorded in `schema_migrations`. `client`
 * must be connected to `database` (checked: a wrong client must not migrate
 * another database). Every statement is idempotent, so a second run, or
 * several replicas at once, all succeed; a replica that loses a CREATE race
 * treats "already exists" as done. Returns the versions this call applied.
 */
export async function applyClickHouseMigrations(client: ClickHouseExecutor, database: string, logger?: ClickHouseLogger): Promise<string[]> {
  const [info] = await rows<{ db: string; v: string }>(client, 'SELECT currentDatabase() AS db, version() AS v');
  if (info === undefined || info.db !== database) throw new Error(`ClickHouse client is connected to database ${JSON.stringify(info?.db)}, not ${JSON.stringify(database)}`);
  const settings = ddlSettingsFor(info.v);
  const run = async (stmt: string) => {
    try {
      await client.command({ query: stmt, clickhouse_settings: settings });
    } catch (e) {
      const code = clickHouseErrorCode(e);
      if (code === undefined || !ALREADY_EXISTS_CODES.has(code)) throw e;
    }
  };
  await run(MIGRATIONS_TABLE_DDL);
  // Databases migrated before checksums were recorded lack the column.
  const [hasChecksum] = await rows<{ n: number | string }>(client, "SELECT count() AS n FROM system.columns WHERE database = currentDatabase() AND table = 'schema_migrations' AND name = 'checksum'");
  if (Number(hasChecksum?.n) === 0) await run('ALTER TABLE schema_migrations ADD COLUMN checksum String');
  const recorded = new Map(
    (await rows<{ version: string; checksum: string }>(client, 'SELECT version, any(checksum) AS checksum FROM schema_migrations GROUP BY version')).map((r) => [r.version, r.checksum]),
  );
  const applied: string[] = [];
  for (const m of await loadClickHouseMigrations()) {
    const seen = recorded.get(m.version);
    if (seen !== undefined) {
      if (seen !== m.checksum) logger?.warn({ version: m.version, recorded: seen, file: m.checksum }, 'ClickHouse migration file changed after it was applied; it is not applied again');
      continue;
    }
    for (const stmt of m.statements) await run(stmt);
    await client.command({ query: bindParams('INSERT INTO schema_migrations (version, checksum, applied_at) VALUES (?, ?, now())', [m.version, m.checksum]) });
    applied.push(m.version);
  }
  if (applied.length > 0) logger?.info({ database, applied, server: info.v }, 'ClickHouse migrations applied');
  return applied;
}

// ---------------------------------------------------------------------------
// The store.

interface Endpoint {
  url: string;
  username: string;
  password: string;
  database: string;
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
  readonly database: string;
  private readonly endpoint: Endpoint;
  private client: ClickHouseClient | undefined;
  private unquote = false;

  constructor(private readonly opts: ClickHouseSpanStoreOptions) {
    this.endpoint = parseUrl(opts.url);
    this.database = this.endpoint.database;
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
          if (clickHouseErrorCode(e) !== 82) throw e;
        }
      }
    } finally {
      await admin.close();
    }
    const client = this.connect(this.database);
    try {
      await applyClickHouseMigrations(client, this.database, this.opts.logger);
      const [v] = await rows<{ v: string }>(client, 'SELECT version() AS v');
      this.unquote = needsUnquotedCosts(v?.v ?? '');
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
    if (this.client === undefined) throw new Error('ClickHouse span store is not started');
    return this.client;
  }

  async ping(): Promise<void> {
    const r = await this.c().ping();
    if (!r.success) throw r.error;
  }

  async insertLines(lines: Lines, rowCount: number): Promise<void> {
    const chunks = chunksOf(lines);
    if (rowCount === 0 || chunks.every((c) => c.length === 0)) return;
    // Chunks are unquoted one at a time as the request body is sent, so a large
    // insert never holds the event loop for the whole of it.
    const unquote = this.unquote;
    const body = (function* () {
      for (const c of chunks) yield unquote ? unquoteCosts(c) : c;
    })();
    try {
      const res = await this.c().exec({ query: 'INSERT INTO spans FORMAT JSONEachRow', values: Readable.from(body, { objectMode: false }) });
      // The server confirms the insert by ending the (empty) response.
      await new Promise<void>((resolve, reject) => res.stream.once('end', resolve).once('error', reject).resume());
    } catch (e) {
      const code = clickHouseErrorCode(e);
      if (code !== undefined && REJECTED_CODES.has(code)) throw new SpanStoreRejectedError(`ClickHouse refused the rows: ${(e as Error).message.split('\n')[0] ?? ''}`, { cause: e });
      throw e;
    }
  }

  async replaceLines(lines: Lines, rowCount: number): Promise<void> {
    // The replacement rows carry a newer received_at, ReplacingMergeTree's version column.
    return this.insertLines(lines, rowCount);
  }

  async query(sql: string, params: readonly unknown[] = []): Promise<QueryRow[]> {
    return rows<QueryRow>(this.c(), bindParams(sql, params));
  }

  async readOnlyQuery(sql: string, params: readonly unknown[] = []): Promise<QueryRow[]> {
    try {
      // readonly=2 refuses every write but still lets the client send its output settings.
      const rs = await this.c().query({ query: bindParams(sql, params), format: 'JSONEachRow', clickhouse_settings: { readonly: '2' } });
      return await rs.json<QueryRow>();
    } catch (e) {
      if (clickHouseErrorCode(e) === 164) throw new ReadOnlyQueryError('only queries that read are allowed here');
      throw e;
    }
  }
}
