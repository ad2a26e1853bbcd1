import pg from 'pg';
import type { Lease } from './clickhouse-derive.js';
import { parseDatabaseUrl } from './control-store-postgres.js';

/**
 * A cluster-wide lease on PostgreSQL: a session advisory lock held on a
 * connection of its own. The lock goes with the session, so a process that
 * dies (or loses its connection) frees it without any clock or expiry.
 */
export class PgAdvisoryLease implements Lease {
  private client: pg.Client | undefined;
  private held = false;

  constructor(
    private readonly url: string,
    /** The lock's name, one per job and per store (e.g. `trace-ingest:derive:<database>`). */
    private readonly name: string,
  ) {}

  async hold(): Promise<boolean> {
    try {
      if (this.client === undefined) {
        const c = new pg.Client({ connectionString: parseDatabaseUrl(this.url).url, connectionTimeoutMillis: 3000, query_timeout: 5000 });
        // A dropped connection drops the lock with it.
        c.on('error', () => this.drop());
        await c.connect();
        this.client = c;
      }
      if (this.held) {
        await this.client.query('SELECT 1');
        return true;
      }
      const r = await this.client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [this.name]);
      this.held = r.rows[0]?.ok === true;
      return this.held;
    } catch {
      this.drop();
      return false;
    }
  }

  private drop(): void {
    const c = this.client;
    this.client = undefined;
    this.held = false;
    void c?.end().catch(() => undefined);
  }

  async close(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    this.held = false;
    await c?.end().catch(() => undefined);
  }
}

/** A job's lease name for the cluster of replicas sharing this PostgreSQL schema and span store (no credentials in it). */
export function leaseName(job: string, databaseUrl: string, clickhouseUrl?: string): string {
  const store = clickhouseUrl === undefined ? '' : ((u) => `${u.host}${u.pathname}`)(new URL(clickhouseUrl));
  return `trace-ingest:${job}:${parseDatabaseUrl(databaseUrl).schema ?? 'public'}:${store}`;
}
