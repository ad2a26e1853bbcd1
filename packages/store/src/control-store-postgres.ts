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
}

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
 * When PostgreSQL cannot be reached, calls fail within the connect timeout
 * with ServiceUnavailableError (503 + Retry-After) rather than a 500, because
 * retrying the same request later is the right thing for a client to do.
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
    this.poolConfig = {
      connectionString: parsed.url,
      max: opts.poolSize ?? 10,
      // A dead database must surface as a 503 quickly, not as a hung request.
      connectionTimeoutMillis: 3000,
      idleTimeoutMillis: 30_000,
      application_name: 'trace-ingest',
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
      await guard(() => this.migrate(pool));
    } catch (e) {
      await pool.end();
      throw e;
    }
    this.pool = pool;
  }

  /**
   * Replicas may start together: a session advisory lock (per schema) makes
   * one of them migrate while the others wait, then find nothing left to do.
   */
  private async migrate(pool: pg.Pool): Promise<void> {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      const lockName = `trace-ingest:migrate:${this.schema}`;
      await client.query('SELECT pg_advisory_lock(hashtext($1))', [lockName]);
      try {
        await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(this.schema)}`);
        await migrate(drizzle(client), { migrationsFolder: MIGRATIONS_DIR, migrationsSchema: this.schema, migrationsTable: MIGRATIONS_TABLE });
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtext($1))', [lockName]);
      }
    } catch (e) {
      broken = e instanceof Error ? e : new Error(String(e));
      throw e;
    } finally {
      // A connection that failed mid-migration may still hold the lock: destroy it.
      client.release(broken);
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
    throw e;
  }
}
