// npm run bench -- --retention [--rows 1000000] [--batch 5000]
//
// What retention costs and gives back on the embedded store (DuckDB): loads --rows realistic
// rows (realistic.js: 1-3 KB texts, 90 days) through the store's insert path, then applies a
// retention of 60 days for rows and 30 days for texts (a third of the rows deleted, the texts
// of another third emptied) with the retention pass the server runs (SpanStore.expire, in
// batches), while inserts keep coming, as on a running server. Prints:
//   - the file's size before, after the pass, and after as many new rows as were deleted
//     (DuckDB reuses freed blocks rather than shrinking the file);
//   - the time of the pass and rows per second;
//   - insert µs per row before and during the pass (medians);
//   - peak RSS of the process;
//   - before the pass, `trace-ingest export` (Parquet) of the last 10 days and of all 90 days:
//     rows, seconds and the CLI process's peak RSS (memory flat whatever the window holds).
// Nothing is asserted; the figures go to stdout and bench/results/retention-<timestamp>.json.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { cli, root } from './procs.js';
import { traces } from './realistic.js';
import { prng } from './workloads.js';

const DAY = 86_400_000;

function options(argv) {
  const o = { rows: 1_000_000, batch: 5000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--retention') continue;
    else if (a === '--rows') o.rows = Number(argv[++i]);
    else if (a === '--batch') o.batch = Number(argv[++i]);
    else throw new Error(`unknown argument "${a}" (retention: --rows n --batch n)`);
  }
  if (!(o.rows > 0) || !(o.batch > 0)) throw new Error('--rows and --batch take positive numbers');
  return o;
}

const median = (xs) => (xs.length === 0 ? NaN : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]);
const mib = (n) => (n / 1024 ** 2).toFixed(0);

async function main() {
  const o = options(process.argv.slice(2));
  const { DuckDbSpanStore } = await import(path.join(root, 'packages/store/dist/duckdb.js'));
  const { payloadToRows, encodeLine } = await import(path.join(root, 'packages/shared/dist/rows.js'));
  const { PriceEngine } = await import(path.join(root, 'packages/shared/dist/price-engine.js'));
  const { retentionCuts } = await import(path.join(root, 'packages/shared/dist/lifecycle.js'));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-retention-'));
  const file = path.join(dir, 'spans.duckdb');
  const store = new DuckDbSpanStore({ file, threads: 1, memoryLimit: '1GiB' });
  await store.start();
  const engine = await PriceEngine.create();
  cli({ DATA_DIR: dir, LOG_LEVEL: 'warn' }, 'orgs', 'create', 'bench');
  const orgId = JSON.parse(cli({ DATA_DIR: dir, LOG_LEVEL: 'warn' }, 'orgs', 'list', '--json')).find((x) => x.name === 'bench').id;
  const end = Math.floor(Date.now() / DAY) * DAY;
  const rand = prng(7);
  // The load covers the 90 days before `end`; the rows sent during and after the pass are newer.
  const loadSource = traces(o.rows, end, rand);
  const freshSource = traces(o.rows * 4, end + 90 * DAY, rand);
  let peakRss = 0;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 200);
  sampler.unref();

  /** One batch as the flusher inserts it, received now. */
  const insertBatch = async (source) => {
    const lines = [];
    let n = 0;
    while (n < o.batch) {
      const { value: trace, done } = source.next();
      if (done) break;
      for (const r of payloadToRows({ version: 'v1', traces: [trace] }, { orgId, keyPrefix: 'ti_bench', receivedAt: Date.now() }, (sp) =>
        engine.price(sp, orgId),
      )) {
        lines.push(encodeLine(r));
        n++;
      }
    }
    if (n === 0) return { us: NaN, n };
    const t0 = performance.now();
    await store.insertLines(Buffer.from(lines.join('\n') + '\n'), n);
    return { us: ((performance.now() - t0) * 1000) / n, n };
  };
  const size = () => fs.statSync(file).size + (fs.existsSync(`${file}.wal`) ? fs.statSync(`${file}.wal`).size : 0);

  let loaded = 0;
  const t0 = performance.now();
  while (loaded < o.rows) {
    loaded += (await insertBatch(loadSource)).n;
    if (loaded % (o.batch * 40) < o.batch) process.stderr.write(`\rloaded ${loaded} rows (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  }
  process.stderr.write('\n');
  await store.query('SELECT 1');
  await store.expire({ orgId: 'none' }, 1); // no-op, leaves the store as loaded
  const before = { bytes: size(), rows: Number((await store.query('SELECT count(*) AS n FROM spans'))[0].n) };
  // Exports through the CLI (the store closed, as with no server running): the CLI opens the file itself.
  await store.close();
  const exports = {};
  for (const [name, days] of [
    ['10 days', 10],
    ['90 days', 91],
  ]) {
    const out = path.join(dir, `export-${days}.parquet`);
    const from = new Date(end - days * DAY).toISOString().slice(0, 10);
    const to = new Date(end).toISOString().slice(0, 10);
    const t = performance.now();
    const res = spawnSync(
      '/usr/bin/time',
      [
        '-f',
        'peak %M',
        process.execPath,
        path.join(root, 'packages/cli/bin/trace-ingest.js'),
        'export',
        '--org',
        'bench',
        '--from',
        from,
        '--to',
        to,
        '--format',
        'parquet',
        '--out',
        out,
        '--json',
      ],
      { env: { ...process.env, DATA_DIR: dir }, encoding: 'utf8', maxBuffer: 1 << 24 },
    );
    if (res.status !== 0) throw new Error(`export failed: ${res.stderr}`);
    exports[name] = {
      rows: JSON.parse(res.stdout).rows,
      seconds: Number(((performance.now() - t) / 1000).toFixed(1)),
      peakRssMiB: Math.round(Number(/peak (\d+)/.exec(res.stderr)?.[1]) / 1024),
      fileMiB: Number(mib(fs.statSync(out).size)),
    };
    fs.rmSync(out);
  }
  await store.start();
  const quiet = [];
  for (let i = 0; i < 10; i++) quiet.push((await insertBatch(freshSource)).us);

  // The newest rows are "today": 60 days of rows, 30 days of texts.
  const cut = { orgId, ...retentionCuts(end, { days: 60, textDays: 30 }) };
  let passDone = false;
  const during = [];
  const ingest = (async () => {
    while (!passDone) during.push((await insertBatch(freshSource)).us);
  })();
  const p0 = performance.now();
  let deleted = 0;
  let emptied = 0;
  for (;;) {
    const r = await store.expire(cut, 200_000);
    deleted += r.deletedRows;
    emptied += r.emptiedRows;
    if (r.done) break;
  }
  const passMs = performance.now() - p0;
  passDone = true;
  await ingest;
  const after = { bytes: size(), rows: Number((await store.query('SELECT count(*) AS n FROM spans'))[0].n) };
  // As many new rows as were deleted: they fill the freed blocks.
  let refilled = 0;
  while (refilled < deleted) refilled += (await insertBatch(freshSource)).n;
  await store.close();
  await store.start();
  const refill = { bytes: size(), rows: Number((await store.query('SELECT count(*) AS n FROM spans'))[0].n) };
  await store.close();
  clearInterval(sampler);

  const out = {
    rows: o.rows,
    before,
    pass: { deleted, emptied, ms: Math.round(passMs), rowsPerSec: Math.round(((deleted + emptied) * 1000) / passMs) },
    after,
    refill: { ...refill, inserted: refilled },
    insertUsPerRow: { quiet: median(quiet), duringPass: median(during), batchesDuringPass: during.length },
    peakRssMiB: Number(mib(peakRss)),
    exports,
  };
  console.log(`retention on DuckDB, ${o.rows} rows (1-3 KB texts, 90 days), rows kept 60 days, texts 30:`);
  console.log(`  file before          ${mib(before.bytes)} MiB, ${before.rows} rows`);
  console.log(`  pass                 ${deleted} rows deleted, ${emptied} texts emptied in ${(passMs / 1000).toFixed(1)} s (${out.pass.rowsPerSec} rows/s)`);
  console.log(`  file after the pass  ${mib(after.bytes)} MiB, ${after.rows} rows (inserts went on meanwhile)`);
  console.log(`  after ${refilled} new rows  ${mib(refill.bytes)} MiB, ${refill.rows} rows`);
  console.log(
    `  insert µs/row        ${out.insertUsPerRow.quiet.toFixed(1)} quiet, ` +
      `${out.insertUsPerRow.duringPass.toFixed(1)} during the pass (${during.length} batches)`,
  );
  console.log(`  peak RSS             ${out.peakRssMiB} MiB`);
  for (const [name, e] of Object.entries(exports))
    console.log(`  export ${name.padEnd(14)}${e.rows} rows, ${e.seconds} s, ${e.fileMiB} MiB Parquet, CLI peak RSS ${e.peakRssMiB} MiB`);
  fs.mkdirSync(path.join(root, 'bench/results'), { recursive: true });
  fs.writeFileSync(path.join(root, `bench/results/retention-${Date.now()}.json`), JSON.stringify(out, null, 2));
  fs.rmSync(dir, { recursive: true, force: true });
}

await main();
