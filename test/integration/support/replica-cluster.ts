import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { PostgresControlStore } from '@trace-ingest/store/control-store-postgres';
import { startChildServer, type ChildServer } from './child-server.js';
import { PG_URL, REDIS_URL, withSchema } from './services.js';

/** Replicas of the real server (separate DATA_DIRs) on one PostgreSQL schema, one Redis prefix and one ClickHouse database of their own. */
export interface ReplicaCluster {
  /** The schema's, the database's and (with a dash) the Redis prefix's name. */
  id: string;
  /** What every replica is started with (DATA_DIR aside): for a CLI or one more replica. */
  env: {
    DATABASE_URL: string;
    REDIS_URL: string;
    REDIS_KEY_PREFIX: string;
    CLICKHOUSE_URL: string;
    FLUSH_INTERVAL_MS: string;
    DRAIN_GRACE_MS: string;
  };
  dirs: string[];
  /** The running replicas, by DATA_DIR: a test may replace one it killed (`replicas[i] = await startReplica(dirs[i])`). */
  replicas: ChildServer[];
  keys: PostgresControlStore;
  spans: ClickHouseSpanStore;
  startReplica(dir: string): Promise<ChildServer>;
  /**
   * Kills replica `i` with SIGKILL once `acked` holds `before` spans, lets the others ack `after` more,
   * ends the load (`stop`), and starts the replica again on its DATA_DIR.
   */
  killDuringLoad(i: number, acked: ReadonlySet<string>, before: number, after: number, stop: () => Promise<void>): Promise<void>;
  /** Stops the replicas and drops what the cluster made: the database, the schema, the Redis keys, the DATA_DIRs. */
  dispose(): Promise<void>;
}

/** `name` names the schema, database and Redis prefix (with a random suffix); `clickhouseHttpUrl` is the test server's. */
export async function startReplicaCluster(name: string, clickhouseHttpUrl: string, count = 3): Promise<ReplicaCluster> {
  const id = `${name}_${randomBytes(4).toString('hex')}`;
  const env = {
    DATABASE_URL: withSchema(PG_URL, id),
    REDIS_URL,
    REDIS_KEY_PREFIX: `${id}-`,
    CLICKHOUSE_URL: `${clickhouseHttpUrl.replace('http://', 'http://default:@')}/${id}`,
    FLUSH_INTERVAL_MS: '100',
    DRAIN_GRACE_MS: '0',
  };
  const keys = new PostgresControlStore(env.DATABASE_URL);
  await keys.start();
  const spans = new ClickHouseSpanStore({ url: env.CLICKHOUSE_URL });
  await spans.start();
  const dirs = Array.from({ length: count }, (_, i) => fs.mkdtempSync(path.join(os.tmpdir(), `${name}-${i}-`)));
  const startReplica = (dir: string) => startChildServer({ ...env, DATA_DIR: dir });
  const replicas = await Promise.all(dirs.map((d) => startReplica(d)));
  return {
    id,
    env,
    dirs,
    replicas,
    keys,
    spans,
    startReplica,
    async killDuringLoad(i, acked, before, after, stop) {
      // By acknowledged spans, not by time: a busy machine takes longer to get there.
      const reaches = async (n: number) => {
        while (acked.size < n) await new Promise((r) => setTimeout(r, 20));
      };
      await reaches(before);
      const victim = replicas[i] as ChildServer;
      victim.proc.kill('SIGKILL');
      await victim.exited;
      await reaches(acked.size + after);
      await stop();
      replicas[i] = await startReplica(dirs[i] as string);
    },
    async dispose() {
      for (const r of replicas) {
        if (r.proc.exitCode === null && r.proc.signalCode === null) r.proc.kill('SIGTERM');
        await r.exited;
      }
      await keys.close();
      await spans.query(`DROP DATABASE IF EXISTS ${id}`).catch(() => undefined);
      await spans.close();
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${id} CASCADE`);
      await client.end();
      const redis = new Redis(env.REDIS_URL);
      const stale = await redis.keys(`${env.REDIS_KEY_PREFIX}*`);
      if (stale.length > 0) await redis.del(...stale);
      redis.disconnect();
      for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
    },
  };
}
