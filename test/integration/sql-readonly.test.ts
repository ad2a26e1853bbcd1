import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { createContext, type CliContext } from '@trace-ingest/cli/program-context';
import { sql } from '@trace-ingest/cli/actions/usage';
import { ClickHouseSpanStore } from '@trace-ingest/store/clickhouse';
import { makePayload } from '../factories.js';
import { startTestServer, type TestServer } from './support/ingest-server.js';

/**
 * `trace-ingest sql` (and the admin socket's query route) reads only, by the
 * engine's own settings: every statement below ran before (spans deleted
 * with no audit row, a file written with the server's rights, host files
 * read, an extension fetched); now each is refused and nothing changed.
 */

const out = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-sql-'));
const written = path.join(out, 'written.csv');

const DUCKDB_ATTACKS = [
  'DELETE FROM spans',
  'EXPLAIN ANALYZE DELETE FROM spans',
  'EXPLAIN ANALYZE UPDATE spans SET total_cost = 0',
  'EXPLAIN ANALYZE CREATE TABLE stolen AS SELECT * FROM spans',
  `COPY (SELECT * FROM spans) TO '${written}'`,
  `EXPLAIN ANALYZE COPY (SELECT * FROM spans) TO '${written}'`,
  "SELECT * FROM read_csv('/etc/passwd')",
  "SELECT * FROM read_blob('/etc/hostname')",
  "SELECT * FROM glob('/etc/*')",
  "SELECT * FROM read_csv('https://example.com/x.csv')",
  'INSTALL httpfs',
  'LOAD httpfs',
  'SET enable_external_access = true',
  `ATTACH '${path.join(out, 'other.duckdb')}' AS other`,
  'CHECKPOINT',
];

async function expectRefusedDuckDb(ctx: CliContext, count: () => Promise<number>): Promise<void> {
  const before = await count();
  expect(before).toBeGreaterThan(0);
  for (const q of DUCKDB_ATTACKS) await expect(sql(ctx, q), q).rejects.toThrow(/read-only|reads the span store's tables only|SELECT/);
  expect(await count()).toBe(before);
  expect(fs.existsSync(written)).toBe(false);
  expect(fs.existsSync(path.join(out, 'other.duckdb'))).toBe(false);
  // What it is for still works, values bound.
  const { rows } = await sql(ctx, 'SELECT count(*) AS n FROM spans');
  expect(Number(rows[0]?.n)).toBe(before);
}

describe('sql on DuckDB reads only, through the running server and without one', () => {
  let t: TestServer;
  let ctx: CliContext;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-sql-data-'));
  beforeAll(async () => {
    t = await startTestServer({}, {}, dataDir);
    const { key } = await t.newKey('acme');
    expect((await t.post(makePayload(), { key })).status).toBe(202);
    await t.server.flush();
    ctx = createContext(loadConfig({ DATA_DIR: t.dir }));
  });
  afterAll(async () => {
    await ctx?.close();
    await t?.close();
    fs.rmSync(out, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('through the admin socket: a READ ONLY transaction on an instance without files, network or extensions', async () => {
    await expectRefusedDuckDb(ctx, async () => Number((await t.spans('SELECT count(*) AS n FROM spans'))[0]?.n));
    // The server goes on storing spans: its own writes are not read-only.
    const { key } = await t.newKey('acme');
    expect((await t.post(makePayload(), { key })).status).toBe(202);
    await t.server.flush();
    expect(Number((await t.spans('SELECT count(*) AS n FROM spans'))[0]?.n)).toBe(2);
  });

  it('without a server: the file attached READ_ONLY, the same settings', async () => {
    await ctx.close();
    await t.close();
    const direct = createContext(loadConfig({ DATA_DIR: dataDir }));
    onTestFinished(() => direct.close());
    await expectRefusedDuckDb(direct, async () => Number((await sql(direct, 'SELECT count(*) AS n FROM spans')).rows[0]?.n));
  });
});

describe('sql on ClickHouse 18.16 reads only: readonly=1, as a subquery', () => {
  it('refuses writes, SET, KILL QUERY and every table function that reaches out', async () => {
    const url = `${inject('clickhouseHttpUrl').replace('http://', 'http://default:@')}/ti_sql_${process.pid}`;
    const store = new ClickHouseSpanStore({ url });
    await store.start();
    onTestFinished(async () => {
      await store.query(`DROP DATABASE IF EXISTS ti_sql_${process.pid}`).catch(() => undefined);
      await store.close();
    });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-sql-ch-'));
    onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
    const ctx = createContext(loadConfig({ DATA_DIR: dir, CLICKHOUSE_URL: url }));
    onTestFinished(() => ctx.close());
    const attacks = [
      "SELECT * FROM url('http://127.0.0.1:1/x', CSV, 'a String')",
      "SELECT * FROM remote('127.0.0.1', system.one)",
      "SELECT * FROM file('x.csv', CSV, 'a String')",
      "SELECT * FROM s3('http://127.0.0.1:1/b/x', CSV, 'a String')",
      'SELECT * FROM numbers(3)',
      'KILL QUERY WHERE 1',
      'INSERT INTO spans (org_id) VALUES (1)',
      'ALTER TABLE spans DELETE WHERE 1',
      'DROP TABLE spans',
      'SET readonly = 0',
      'SELECT 1 SETTINGS readonly = 0',
      'SYSTEM STOP MERGES',
      'OPTIMIZE TABLE spans',
    ];
    for (const q of attacks) await expect(sql(ctx, q), q).rejects.toThrow(/read-only|only queries that read|SELECT/);
    expect((await sql(ctx, 'SELECT count() AS n FROM spans -- a comment at the end')).rows).toEqual([{ n: 0 }]);
    expect((await sql(ctx, 'SELECT 1 AS one;')).rows).toEqual([{ one: 1 }]);
  });
});
