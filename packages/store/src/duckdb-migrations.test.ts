import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { encodeLine, payloadToRows, UNPRICED } from '@trace-ingest/shared/rows';
import { makeBulkPayload } from '../../../test/factories.js';
import { DuckDbSpanStore } from './duckdb.js';
import { applyDuckDbMigrations, loadDuckDbMigrations, spansSchemaDrift } from './duckdb-migrations.js';
import { SpanStoreRejectedError, SpanStoreSchemaError } from './span-store.js';
import { TOP_LISTS } from './top-lists.js';

const TOP_LIST_TABLES = Object.values(TOP_LISTS).flatMap((l) => [l.table, l.marks]);
const ctx = { orgId: 'org_a', keyPrefix: 'ti_abcdefghi', receivedAt: 1_700_000_000_000 };

function lines(traces: number, spans: number, orgId = ctx.orgId): { buf: Buffer; rows: number } {
  const rows = payloadToRows(makeBulkPayload(traces, spans), { ...ctx, orgId }, () => UNPRICED);
  return { buf: Buffer.from(rows.map((r) => encodeLine(r) + '\n').join('')), rows: rows.length };
}

/** Runs `body` on a plain DuckDB connection to `file` (no store, no migrations), then lets go of the file. */
async function raw<T>(file: string, body: (c: Awaited<ReturnType<DuckDBInstance['connect']>>) => Promise<T>): Promise<T> {
  const inst = await DuckDBInstance.create(file);
  const c = await inst.connect();
  try {
    return await body(c);
  } finally {
    c.closeSync();
    inst.closeSync();
  }
}

const all = async (c: Awaited<ReturnType<DuckDBInstance['connect']>>, sql: string) => (await c.runAndReadAll(sql)).getRowObjectsJson();

describe('DuckDB schema migrations', () => {
  let dir: string;
  let stores: DuckDbSpanStore[];
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-duck-mig-'));
    stores = [];
  });
  afterEach(async () => {
    for (const s of stores) await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const open = async (file: string, migrationsDir?: URL) => {
    const s = new DuckDbSpanStore({ file, migrationsDir });
    stores.push(s);
    await s.start();
    return s;
  };

  it('brings a new file to the columns of SPAN_COLUMNS (a column added to rows.ts without a migration fails here)', async () => {
    const file = path.join(dir, 'new.duckdb');
    await (await open(file)).close();
    const versions = (await loadDuckDbMigrations()).map((m) => m.version);
    await raw(file, async (c) => {
      expect(await spansSchemaDrift(c)).toEqual([]);
      expect((await all(c, 'SELECT version FROM schema_migrations ORDER BY version')).map((r) => r.version)).toEqual(versions);
    });
  });

  it('upgrades a file made before versions were recorded: its rows stay, new ones go in, and a second start applies nothing', async () => {
    const file = path.join(dir, 'old.duckdb');
    const before = lines(3, 4);
    const s = await open(file);
    await s.insertLines(before.buf, before.rows);
    await s.close();
    // Back to the state the older release left: the schema of 0001 (with its index) and rows, no version table.
    const [first] = await loadDuckDbMigrations();
    await raw(file, async (c) => {
      await c.run('CREATE TABLE old_rows AS SELECT * EXCLUDE (trace_metadata, span_metadata) FROM spans');
      for (const t of [
        'spans',
        'usage_daily',
        'customers_daily',
        'models_daily',
        'sessions_daily',
        'workflows_daily',
        'traces',
        ...TOP_LIST_TABLES,
        'schema_migrations',
      ])
        await c.run(`DROP TABLE ${t}`);
      for (const stmt of first?.statements ?? []) await c.run(stmt);
      // The rows as that schema holds them: the columns added since are left out.
      const held = await all(
        c,
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'spans' AND column_name NOT IN ('trace_metadata', 'span_metadata')",
      );
      await c.run(`INSERT INTO spans BY NAME SELECT ${held.map((r) => `"${String(r.column_name)}"`).join(', ')} FROM old_rows`);
      await c.run('DROP TABLE old_rows');
      expect(await all(c, "SELECT index_name FROM duckdb_indexes() WHERE index_name = 'spans_org_day_idx'")).toHaveLength(1);
    });
    const again = await open(file);
    const after = lines(2, 5, 'org_b');
    await again.insertLines(after.buf, after.rows);
    expect(Number((await again.query('SELECT count(*)::INTEGER AS n FROM spans'))[0]?.n)).toBe(before.rows + after.rows);
    // The rollups start from the rows stored before the upgrade, and the re-sent rows are not stored twice.
    await again.insertLines(before.buf, before.rows);
    expect(Number((await again.query('SELECT sum(spans)::INTEGER AS n FROM usage_daily'))[0]?.n)).toBe(before.rows + after.rows);
    expect(Number((await again.query('SELECT count(*)::INTEGER AS n FROM spans'))[0]?.n)).toBe(before.rows + after.rows);
    await again.close();
    await raw(file, async (c) => {
      expect(await all(c, "SELECT index_name FROM duckdb_indexes() WHERE index_name = 'spans_org_day_idx'")).toEqual([]);
      expect(await applyDuckDbMigrations(c)).toEqual([]);
      expect(await spansSchemaDrift(c)).toEqual([]);
    });
  });

  it('keeps rows written before an upgrade and takes new ones after it', async () => {
    const file = path.join(dir, 'rows.duckdb');
    const old = lines(4, 5);
    const s = await open(file);
    await s.insertLines(old.buf, old.rows);
    await s.close();
    // A later release adds a column: its migration is applied on the next start.
    const next = path.join(dir, 'migrations');
    fs.mkdirSync(next);
    for (const f of fs.readdirSync(new URL('../../../migrations/duckdb/', import.meta.url))) {
      fs.copyFileSync(new URL(`../../../migrations/duckdb/${f}`, import.meta.url), path.join(next, f));
    }
    fs.writeFileSync(path.join(next, '9999_added_column.sql'), "ALTER TABLE spans ADD COLUMN IF NOT EXISTS added_later VARCHAR DEFAULT '';\n");
    const upgraded = await open(file, pathToFileURL(next + '/'));
    const fresh = lines(1, 3, 'org_c');
    await upgraded.insertLines(fresh.buf, fresh.rows);
    const counts = await upgraded.query('SELECT org_id, count(*)::INTEGER AS n, min(added_later) AS v FROM spans GROUP BY org_id ORDER BY org_id');
    expect(counts).toEqual([
      { org_id: 'org_a', n: old.rows, v: '' },
      { org_id: 'org_c', n: fresh.rows, v: '' },
    ]);
  });

  it('a file one column short refuses inserts as retryable (schema behind), never as rows to dead-letter', async () => {
    const file = path.join(dir, 'short.duckdb');
    await (await open(file)).close();
    await raw(file, async (c) => {
      await c.run('ALTER TABLE spans DROP COLUMN system_fingerprint');
      expect(await spansSchemaDrift(c)).toEqual(['system_fingerprint missing']);
    });
    const s = await open(file);
    const b = lines(1, 2);
    const err = await s.insertLines(b.buf, b.rows).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SpanStoreSchemaError);
    expect(err).not.toBeInstanceOf(SpanStoreRejectedError);
    expect((err as Error).message).toMatch(/trace-ingest migrate/);
  });

  it('reports a migration file changed after it was applied, and does not apply it again', async () => {
    const file = path.join(dir, 'changed.duckdb');
    const own = path.join(dir, 'own');
    fs.mkdirSync(own);
    fs.writeFileSync(path.join(own, '0001_t.sql'), 'CREATE TABLE t (a INTEGER);\n');
    const url = pathToFileURL(own + '/');
    const warned: object[] = [];
    const logger = { warn: (o: object) => warned.push(o), info: () => undefined };
    await raw(file, async (c) => {
      expect(await applyDuckDbMigrations(c, logger, url)).toEqual(['0001_t']);
      fs.writeFileSync(path.join(own, '0001_t.sql'), 'CREATE TABLE t (a INTEGER, b INTEGER);\n');
      expect(await applyDuckDbMigrations(c, logger, url)).toEqual([]);
    });
    expect(warned).toHaveLength(1);
  });

  it('rolls a failed migration back whole: neither its statements nor its record stay', async () => {
    const file = path.join(dir, 'failed.duckdb');
    const own = path.join(dir, 'bad');
    fs.mkdirSync(own);
    fs.writeFileSync(path.join(own, '0001_half.sql'), 'CREATE TABLE half (a INTEGER);\nSELECT * FROM no_such_table;\n');
    await raw(file, async (c) => {
      await expect(applyDuckDbMigrations(c, undefined, pathToFileURL(own + '/'))).rejects.toThrow(/DuckDB migration 0001_half failed/);
      expect(await all(c, "SELECT table_name FROM duckdb_tables() WHERE table_name = 'half'")).toEqual([]);
      expect(await all(c, 'SELECT version FROM schema_migrations')).toEqual([]);
    });
  });
});
