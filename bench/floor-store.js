// Floor (c): a direct bulk insert of the same rows into the store, without the service.
// argv[2]: a JSON config file { workload, rows, clickhouseUrl? }.
// The rows are the service's own (payloadToRows + encodeLine, unpriced) from the same
// bodies with fresh ids, written as NDJSON, then loaded in one statement:
//   DuckDB:     INSERT INTO spans SELECT ... FROM read_json('<file>', format = 'newline_delimited')
//               into a fresh file with the service's table (primary key and index included);
//   ClickHouse: one HTTP `INSERT INTO spans FORMAT JSONEachRow` into a fresh database with the
//               service's migrations.
// Only the load statement is timed (and, for DuckDB, its CPU in this process, every thread).
// Prints { rows, bytes, seconds, rowsPerSec, mbPerSec, cpuUsPerRow }.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stamp, workload } from './workloads.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const { payloadToRows, encodeLine, noPricing, SPAN_COLUMNS } = await import(path.join(root, 'packages/shared/dist/rows.js'));

function ndjson() {
  // The otlp and grpc workloads carry the same spans as small: their rows are small's.
  const w = workload(cfg.workload === 'otlp' || cfg.workload === 'grpc' ? 'small' : cfg.workload);
  const body = Buffer.from(w.body);
  const parts = [];
  let rows = 0;
  for (let n = 0; rows < cfg.rows; n++) {
    const payload = JSON.parse(stamp(body, w.slots, n).toString('utf8'));
    for (const r of payloadToRows(payload, { orgId: 'org_bench', keyPrefix: 'ti_bench', receivedAt: Date.now() }, noPricing)) {
      parts.push(encodeLine(r), '\n');
      rows++;
    }
  }
  return { lines: Buffer.from(parts.join(''), 'utf8'), rows };
}

async function duckdb(lines, rows) {
  const { DuckDBInstance } = await import('@duckdb/node-api');
  const { applyDuckDbMigrations, DUCKDB_TYPES } = await import(path.join(root, 'packages/store/dist/duckdb.js'));
  const { loadColumnList } = await import(path.join(root, 'packages/store/dist/duckdb-migrations.js'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-bench-store-'));
  const file = path.join(dir, 'rows.ndjson');
  fs.writeFileSync(file, lines);
  const inst = await DuckDBInstance.create(path.join(dir, 'spans.duckdb'));
  const conn = await inst.connect();
  try {
    await applyDuckDbMigrations(conn);
    const list = SPAN_COLUMNS.map(([n]) => `"${n}"`).join(', ');
    const columns = `{${SPAN_COLUMNS.map(([n, k]) => `'${n}': '${DUCKDB_TYPES[k]}'`).join(', ')}}`;
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    await conn.run(
      // A key a line leaves out is its column's empty value (loadColumnList), as in the store's own load.
      `INSERT INTO spans (${list}) SELECT ${loadColumnList()} FROM read_json('${file}', format = 'newline_delimited', ` +
        `columns = ${columns}, maximum_object_size = 33554432)`,
    );
    const seconds = (performance.now() - t0) / 1000;
    const c = process.cpuUsage(c0);
    const n = Number((await conn.runAndReadAll('SELECT count(*)::BIGINT AS n FROM spans')).getRowObjectsJson()[0].n);
    if (n !== rows) throw new Error(`DuckDB floor stored ${n} of ${rows} rows`);
    return { seconds, cpuSeconds: (c.user + c.system) / 1e6 };
  } finally {
    conn.closeSync();
    inst.closeSync();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function clickhouse(lines, rows) {
  const { ClickHouseSpanStore, unquoteCosts } = await import(path.join(root, 'packages/store/dist/clickhouse.js'));
  const u = new URL(cfg.clickhouseUrl);
  const db = `bench_floor_${Date.now()}`;
  u.pathname = `/${db}`;
  const store = new ClickHouseSpanStore({ url: u.toString() });
  await store.start(); // creates the database and applies the service's migrations
  await store.close();
  const auth = `user=${encodeURIComponent(decodeURIComponent(u.username) || 'default')}&password=${encodeURIComponent(decodeURIComponent(u.password))}`;
  const q = (query, body) => fetch(`${u.protocol}//${u.host}/?${auth}&database=${db}&query=${encodeURIComponent(query)}`, { method: 'POST', body });
  try {
    const body = unquoteCosts(lines.toString('utf8'));
    const t0 = performance.now();
    const res = await q('INSERT INTO spans FORMAT JSONEachRow', body);
    const text = await res.text();
    const seconds = (performance.now() - t0) / 1000;
    if (!res.ok) throw new Error(`ClickHouse floor insert failed: ${text.slice(0, 300)}`);
    const n = Number((await (await q('SELECT count() FROM spans FINAL')).text()).trim());
    if (n !== rows) throw new Error(`ClickHouse floor stored ${n} of ${rows} rows`);
    // The insert's CPU is ClickHouse's, in another process: not counted here.
    return { seconds, cpuSeconds: NaN };
  } finally {
    await q(`DROP DATABASE IF EXISTS ${db}`);
  }
}

const { lines, rows } = ndjson();
const { seconds, cpuSeconds } = cfg.clickhouseUrl ? await clickhouse(lines, rows) : await duckdb(lines, rows);
process.stdout.write(
  JSON.stringify({
    store: cfg.clickhouseUrl ? 'clickhouse' : 'duckdb',
    rows,
    bytes: lines.length,
    seconds,
    rowsPerSec: rows / seconds,
    mbPerSec: lines.length / seconds / 1e6,
    cpuUsPerRow: (cpuSeconds * 1e6) / rows,
  }),
);
