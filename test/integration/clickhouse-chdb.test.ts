import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeRow, payloadToRows, UNPRICED } from '@trace-ingest/shared/rows';
import { clickHouseMigrations, ddlSettingsFor, MIGRATIONS_TABLE_DDL, quoteString, unquoteCosts } from '@trace-ingest/store/clickhouse';
import { makePayload, makeSpan, makeTrace } from '../factories.js';

/** The same schema on a current engine: chdb, an in-process ClickHouse 26.x. */
interface ChdbSession {
  query(sql: string, format?: string): string;
  cleanup(): void;
}

function loadChdb(): { Session: new (dir: string) => ChdbSession; version(): { chdb: string; engine?: string } } {
  const dir = process.env.CHDB_MODULE_DIR;
  if (dir === undefined || dir === '') {
    throw new Error('CHDB_MODULE_DIR is not set: install chdb outside the repo with `npm install --prefix ~/.cache/trace-ingest/chdb chdb@3.4.0` and export CHDB_MODULE_DIR=~/.cache/trace-ingest/chdb/node_modules/chdb (.ci/run does both)');
  }
  return createRequire(import.meta.url)(dir) as ReturnType<typeof loadChdb>;
}

describe('ClickHouse schema on chdb (current engine)', () => {
  let session: ChdbSession;
  let dir: string;
  beforeAll(() => {
    const chdb = loadChdb();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-chdb-'));
    session = new chdb.Session(dir);
  });
  afterAll(() => {
    session.cleanup();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const migrate = async () => {
    session.query('CREATE DATABASE IF NOT EXISTS ti');
    session.query('USE ti');
    const version = session.query('SELECT version()', 'TSV').trim();
    for (const [k, v] of Object.entries(ddlSettingsFor(version))) session.query(`SET ${k} = ${v}`);
    session.query(MIGRATIONS_TABLE_DDL);
    const applied = new Set(session.query('SELECT DISTINCT version FROM schema_migrations', 'JSONEachRow').split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { version: string }).version));
    for (const m of await clickHouseMigrations()) {
      if (applied.has(m.version)) continue;
      for (const s of m.statements) session.query(s);
      session.query(`INSERT INTO schema_migrations (version, applied_at) VALUES (${quoteString(m.version)}, now())`);
    }
  };

  it('sends the LowCardinality setting only to servers that need it', () => {
    expect(ddlSettingsFor('18.16.1')).toEqual({ allow_experimental_low_cardinality_type: 1 });
    expect(ddlSettingsFor(session.query('SELECT version()', 'TSV').trim())).toEqual({});
  });

  it('accepts the migrations, twice', async () => {
    await migrate();
    await migrate();
    expect(session.query('SELECT count() FROM schema_migrations', 'CSV').trim()).toBe('1');
    expect(session.query("SELECT engine FROM system.tables WHERE database = 'ti' AND name = 'spans'", 'CSV').trim()).toBe('"ReplacingMergeTree"');
  });

  it('takes the insert form the sink sends and gives one row per span with FINAL', () => {
    const rows = payloadToRows(
      makePayload({ traces: [makeTrace({ traceId: 'chdb-1', spans: [makeSpan({ spanId: 'a', usage: { inputTokens: 3 } }), makeSpan({ spanId: 'b' })] })] }),
      { orgId: 'org', keyPrefix: 'ti_x', receivedAt: 1 },
      () => ({ ...UNPRICED, input_cost: '0.000000000000000001', total_cost: '0.000000000000000001', priced: true }),
    );
    const body = unquoteCosts(rows.map((r) => encodeRow(r)).join('\n'));
    session.query(`INSERT INTO spans FORMAT JSONEachRow ${body}`);
    session.query(`INSERT INTO spans FORMAT JSONEachRow ${body}`);
    const out = session.query("SELECT span_id, input_tokens, toString(input_cost) AS c FROM spans FINAL WHERE trace_id = 'chdb-1' ORDER BY span_id", 'JSONEachRow');
    const parsed = out.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(parsed).toEqual([
      { span_id: 'a', input_tokens: 3, c: '0.000000000000000001' },
      { span_id: 'b', input_tokens: 0, c: '0.000000000000000001' },
    ]);
  });
});
