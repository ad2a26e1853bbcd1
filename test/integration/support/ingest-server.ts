import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { loadConfig, type Config } from '@trace-ingest/shared/config';
import type { KeyScope } from '@trace-ingest/shared/scopes';
import { IngestServer, type ServerParts } from '@trace-ingest/server/server';
import { SqliteControlStore } from '@trace-ingest/store/control-store-sqlite';
import { DuckDbSpanStore } from '@trace-ingest/store/duckdb';

/** An in-process server over a temp DATA_DIR, with real SQLite and DuckDB. */
export interface TestServer {
  url: string;
  /** http://127.0.0.1:<port> of the /metrics listener. */
  metricsUrl: string;
  dir: string;
  config: Config;
  server: IngestServer;
  keys: SqliteControlStore;
  /** The server's own connection to the key store (closing it makes the server's key store fail). */
  serverKeys: SqliteControlStore;
  /** Creates an org (on `plan`) and a key for it (ingest unless `scopes` says otherwise); returns the key. */
  newKey(org?: string, plan?: string, scopes?: KeyScope[]): Promise<{ key: string; orgId: string; prefix: string }>;
  post(body: unknown, init?: { key?: string; headers?: Record<string, string>; raw?: string | Buffer }): Promise<Response>;
  /** Flushes the write log and reads the span store. */
  spans(sql?: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

let orgSeq = 0;

export async function startTestServer(env: Record<string, string> = {}, parts: ServerParts = {}, dir?: string, log?: Logger): Promise<TestServer> {
  const dataDir = dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'ti-it-'));
  // Fixtures carry fixed dates in the past: no retention unless a test sets one.
  const config = loadConfig({
    PORT: '0',
    METRICS_PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    DRAIN_GRACE_MS: '0',
    FLUSH_INTERVAL_MS: '60000',
    LOG_LEVEL: 'silent',
    RETENTION_DAYS: '0',
    TEXT_RETENTION_DAYS: '0',
    ...env,
  });
  const logger = log ?? pino({ level: config.LOG_LEVEL });
  // The test's own connection waits for locks as the CLI does; the server's fails fast, as in production.
  const keys = new SqliteControlStore(config.sqliteFile);
  await keys.start();
  const spanStore = parts.spanStore ?? new DuckDbSpanStore({ file: config.duckdbFile });
  const serverKeys = new SqliteControlStore(config.sqliteFile, { busyTimeoutMs: 0 });
  const server = new IngestServer(config, logger, { keyStore: serverKeys, spanStore, ...parts });
  await server.start();
  const url = `http://127.0.0.1:${server.port}`;
  const t: TestServer = {
    url,
    metricsUrl: `http://127.0.0.1:${server.metricsPort}`,
    dir: dataDir,
    config,
    server,
    keys,
    serverKeys,
    async newKey(org, plan, scopes) {
      const name = org ?? `org-${++orgSeq}-${process.pid}`;
      const existing = await keys.getOrg(name);
      const o = existing ?? (await keys.createOrg({ name, ...(plan === undefined ? {} : { planName: plan }) }));
      const k = await keys.createKey({ orgName: name, ...(scopes === undefined ? {} : { scopes }) });
      return { key: k.key, orgId: o.id, prefix: k.prefix };
    },
    async post(body, init = {}) {
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        ...(init.key === undefined ? {} : { authorization: `Bearer ${init.key}` }),
        ...init.headers,
      };
      const payload = init.raw ?? JSON.stringify(body);
      return fetch(`${url}/ingest`, { method: 'POST', headers, body: payload });
    },
    async spans(sql = 'SELECT * FROM spans ORDER BY trace_id, span_id', params = []) {
      await server.flush();
      return spanStore.query(sql, params);
    },
    async close() {
      await server.shutdown();
      await keys.close();
      if (dir === undefined) fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return t;
}

/**
 * A test server and a CLI context over its DATA_DIR, for the tests of one
 * describe block (started before them, closed after them): the CLI's actions
 * reach the server through its admin socket, as an operator's would.
 */
export function serverWithCli(env: Record<string, string> = {}): { server(): TestServer; cli(): CliContext } {
  let t: TestServer | undefined;
  let ctx: CliContext | undefined;
  beforeAll(async () => {
    t = await startTestServer(env);
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
  });
  const need = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('the server is not started yet: use it inside a test');
    return v;
  };
  return { server: () => need(t), cli: () => need(ctx) };
}
