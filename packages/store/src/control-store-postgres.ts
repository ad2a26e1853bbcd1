import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { ConfigError, ServiceUnavailableError, isTiError } from '@trace-ingest/shared/errors';
import { SqlControlStore, type ControlDriver, type SqlStatement } from './control-store.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('../../../migrations/postgres', import.meta.url));
const MIGRATIONS_TABLE = '__drizzle_migrations';
/** Lower case only: the name is used both quoted (DDL) and unquoted (search_path), which fold differently. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
const INT8_OID = 20;

export interface PostgresControlStoreOptions {
  /** Connections per process; every request needs one for each control-store round trip. */
  poolSize?: number;
  /** Wins over `?schema=` in the URL; default `public`. */
  schema?: string;
  /** Bounds on every call (ms; 0: none); see POSTGRES_TIMEOUT_DEFAULTS. */
  timeouts?: Partial<PostgresTimeouts>;
}

/**
 * What bounds one call to PostgreSQL. The server sets the first three on
 * every session; the query timeout is the client's own, for a server that
 * does not answer at all (frozen, partitioned), where no server-side
 * timeout can fire.
 */
export interface PostgresTimeouts {
  /** statement_timeout: a statement running longer is cancelled. */
  statementMs: number;
  /** lock_timeout: a statement waiting longer for a lock (a migration's, a VACUUM FULL's, a row lock) is cancelled. */
  lockMs: number;
  /** idle_in_transaction_session_timeout: a session left idle inside a transaction is ended, releasing its locks. */
  idleInTransactionMs: number;
  /** The client stops waiting for an answer after this long and drops the connection. */
  queryMs: number;
}

/** Short enough that a request never waits on PostgreSQL longer than a client's usual timeout. */
export const POSTGRES_TIMEOUT_DEFAULTS: PostgresTimeouts = { statementMs: 3000, lockMs: 1000, idleInTransactionMs: 10_000, queryMs: 4000 };

/**
 * PostgreSQL under the control store (DATABASE_URL=postgres://...), shared by
 * every replica.
 *
 * Schema: all tables, and drizzle's migration journal, live in one PostgreSQL
 * schema picked by `opts.schema` or else by `?schema=<name>` in the URL
 * (default `public`), so tests and several deployments can share a database.
 * The parameter is removed from the URL before pg sees it and becomes
 * `-c search_path=<name>` on every pooled connection.
 *
 * When PostgreSQL cannot be reached, or does not answer within the timeouts
 * (`PostgresTimeouts`: a frozen server, a table lock held by a migration),
 * calls fail with ServiceUnavailableError (503 + Retry-After) rather than a
 * 500 or a hung request, because retrying the same request later is the
 * right thing for a client to do.
 */
export class PostgresControlDriver implements ControlDriver {
  readonly kind = 'postgres';
  readonly schema: string;
  private readonly poolConfig: pg.PoolConfig;
  private pool: pg.Pool | undefined;
  /** `?` placeholders rewritten to `$n`, and a statement name, per text. */
  private readonly prepared = new Map<string, { text: string; name: string }>();

  constructor(url: string, opts: PostgresControlStoreOptions = {}) {
    const parsed = parseDatabaseUrl(url);
    this.schema = opts.schema ?? parsed.schema ?? 'public';
    if (!SCHEMA_NAME.test(this.schema)) {
      throw new ConfigError(`DATABASE_URL schema "${this.schema}" must match ${String(SCHEMA_NAME)} (lower-case letters, digits, _)`);
    }
    const t = { ...POSTGRES_TIMEOUT_DEFAULTS, ...opts.timeouts };
    this.poolConfig = {
      connectionString: parsed.url,
      max: opts.poolSize ?? 10,
      // A dead database must surface as a 503 quickly, not as a hung request.
      connectionTimeoutMillis: 3000,
      idleTimeoutMillis: 30_000,
      application_name: 'trace-ingest',
      // 0 (unset for pg) leaves the server's own setting.
      statement_timeout: t.statementMs || false,
      lock_timeout: t.lockMs || undefined,
      idle_in_transaction_session_timeout: t.idleInTransactionMs || undefined,
      query_timeout: t.queryMs || undefined,
      options: [parsed.options, `-c search_path=${this.schema}`].filter((o) => o !== '').join(' '),
      // Counts and instants are bigint columns holding safe integers: numbers, for this pool only.
      types: {
        getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
          oid === INT8_OID ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
      },
    };
  }

  async open(): Promise<void> {
    if (this.pool !== undefined) return;
    const pool = new pg.Pool(this.poolConfig);
    // An idle connection dropped by a database restart is discarded by the pool;
    // without a listener the 'error' event would end the process.
    pool.on('error', () => undefined);
    try {
      await guard(() => this.migrate());
    } catch (e) {
      await pool.end();
      throw e;
    }
    this.pool = pool;
  }

  /**
   * Replicas may start together: a session advisory lock (per schema) makes
   * one of them migrate while the others wait, then find nothing left to do.
   * Migrating is not bounded by the request path's timeouts (the wait for
   * another replica's migration, a DDL on a large table): its own connection.
   */
  private async migrate(): Promise<void> {
    const { statement_timeout: _s, lock_timeout: _l, query_timeout: _q, max: _m, idleTimeoutMillis: _i, ...clientConfig } = this.poolConfig;
    const client = new pg.Client(clientConfig);
    client.on('error', () => undefined);
    await client.connect();
    try {
      const lockName = `trace-ingest:migrate:${this.schema}`;
      await client.query('SELECT pg_advisory_lock(hashtext($1))', [lockName]);
      try {
        await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(this.schema)}`);
        await migrate(drizzle(client), { migrationsFolder: MIGRATIONS_DIR, migrationsSchema: this.schema, migrationsTable: MIGRATIONS_TABLE });
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtext($1))', [lockName]);
      }
    } finally {
      // Ending the session releases the advisory lock whatever happened.
      await client.end().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    const pool = this.pool;
    this.pool = undefined;
    await pool?.end();
  }

  /** Named statements: each connection parses and plans a text once. */
  private statement(sql: string, values: readonly unknown[]): pg.QueryConfig {
    let p = this.prepared.get(sql);
    if (p === undefined) {
      let n = 0;
      const text = sql.replaceAll('?', () => `$${++n}`);
      p = { text, name: `ti_${createHash('sha256').update(text).digest('hex').slice(0, 24)}` };
      this.prepared.set(sql, p);
    }
    return { name: p.name, text: p.text, values: [...values] };
  }

  async all<R>(sql: string, params: readonly unknown[]): Promise<R[]> {
    const pool = this.pool;
    if (pool === undefined) throw new Error('control store is not started');
    const res = await guard(() => pool.query(this.statement(sql, params)));
    return res.rows as R[];
  }

  async transaction(statements: readonly SqlStatement[]): Promise<unknown[][]> {
    const pool = this.pool;
    if (pool === undefined) throw new Error('control store is not started');
    return guard(async () => {
      const client = await pool.connect();
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        const out: unknown[][] = [];
        try {
          for (const s of statements) out.push((await client.query(this.statement(s.sql, s.params))).rows);
          await client.query('COMMIT');
        } catch (e) {
          // A connection that did not answer is dropped at once: a ROLLBACK on it would wait again.
          if (isClientTimeout(e)) broken = e as Error;
          else
            await client.query('ROLLBACK').catch((r: unknown) => {
              broken = r instanceof Error ? r : new Error(String(r));
            });
          throw e;
        }
        return out;
      } finally {
        client.release(broken);
      }
    });
  }

  isUniqueViolation(e: unknown): boolean {
    return pgCode(e) === '23505';
  }
}

/**
 * The control store shared by every replica. Nothing is cached in the
 * process: a revoked key, a plan change or a price override written by one
 * replica or the CLI is read by every replica on its next request.
 */
export class PostgresControlStore extends SqlControlStore {
  readonly schema: string;
  constructor(url: string, opts: PostgresControlStoreOptions = {}) {
    const driver = new PostgresControlDriver(url, opts);
    super(driver);
    this.schema = driver.schema;
  }
}

/**
 * Splits DATABASE_URL into what pg understands and the schema to use.
 * `options` is taken out and merged back because pg lets a URL's value
 * override the pool config, which would drop the search_path.
 */
export function parseDatabaseUrl(url: string): { url: string; schema: string | undefined; options: string } {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { url, schema: undefined, options: '' };
  }
  const schemaParam = u.searchParams.get('schema');
  const options = u.searchParams.get('options') ?? '';
  u.searchParams.delete('schema');
  u.searchParams.delete('options');
  return { url: u.toString(), schema: schemaParam === null || schemaParam === '' ? undefined : schemaParam, options };
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** SQLSTATE classes and socket errors that mean "the database is not there right now". */
const UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', '53300', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE']);

function pgCode(e: unknown): string | undefined {
  for (let cur: unknown = e, depth = 0; cur instanceof Error && depth < 4; cur = cur.cause, depth++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/**
 * Cancelled by one of our own bounds: statement_timeout (57014), lock_timeout (55P03),
 * idle_in_transaction_session_timeout (25P03), or the client's query timeout.
 */
const SLOW_CODES = new Set(['57014', '55P03', '25P03']);

function isClientTimeout(e: unknown): boolean {
  return e instanceof Error && /Query read timeout/i.test(e.message);
}

function isSlow(e: unknown): boolean {
  const code = pgCode(e);
  return (code !== undefined && SLOW_CODES.has(code)) || isClientTimeout(e);
}

function isUnavailable(e: unknown): boolean {
  const code = pgCode(e);
  if (code !== undefined && (UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return true;
  for (let cur: unknown = e, depth = 0; cur instanceof Error && depth < 4; cur = cur.cause, depth++) {
    if (/timeout exceeded when trying to connect|Connection terminated/i.test(cur.message)) return true;
  }
  return false;
}

/** Maps outages to 503; every other failure goes to the caller as it is. */
async function guard<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    if (isTiError(e)) throw e;
    if (isUnavailable(e)) throw new ServiceUnavailableError('key store (PostgreSQL) is unreachable; retry shortly', 2, e);
    if (isSlow(e)) throw new ServiceUnavailableError('key store (PostgreSQL) did not answer in time (a lock or a slow server); retry shortly', 2, e);
    throw e;
  }
}
