// npm run bench -- --checkpoint --reuse <dir> [--rounds 12,12,1] [--rows 16384] [--row-group-rows 8192] [--storage-version v1.5.0] [--spans-only]
//
// What one of DuckDB's checkpoints costs on a kept embedded store (a DATA_DIR left by `--growth --keep`), in process:
// a copy of its spans file is opened with automatic checkpoints off, and each round makes that many inserts of
// --rows new realistic rows of today (the flusher's insertLines, or with --spans-only a bare INSERT into `spans` from
// read_json, no rollups, traces or lists), then runs CHECKPOINT. Prints per round the inserts' wall and CPU, the size
// of DuckDB's own log before the checkpoint, and the checkpoint's wall and CPU. The first round pays for reading the
// file's metadata too. --row-group-rows sets the row groups the copy writes (the store's default is 8,192);
// --storage-version the format it is written in (the store's default v1.5.0; a file in an older one is brought to it at
// attach, and --storage-version v1.0.0 keeps such a file as it is).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { traces } from './realistic.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const argv = process.argv.slice(2).filter((a) => a !== '--checkpoint');
const o = { reuse: undefined, rounds: [12, 12, 1], rows: 16_384, rowGroupRows: undefined, storageVersion: undefined, spansOnly: false };
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--reuse') o.reuse = argv[++i];
  else if (a === '--rounds') o.rounds = argv[++i].split(',').map(Number);
  else if (a === '--rows') o.rows = Number(argv[++i]);
  else if (a === '--row-group-rows') o.rowGroupRows = Number(argv[++i]);
  else if (a === '--storage-version') o.storageVersion = argv[++i];
  else if (a === '--spans-only') o.spansOnly = true;
  else throw new Error(`unknown argument "${a}" (--reuse dir --rounds a,b --rows n --row-group-rows n --storage-version v --spans-only)`);
}
if (o.reuse === undefined || !fs.existsSync(path.join(o.reuse, 'spans.duckdb')))
  throw new Error('--checkpoint takes --reuse <dir>: a DATA_DIR kept by `npm run bench -- --growth --keep` (its spans.duckdb)');

const { DuckDbSpanStore } = await import(path.join(root, 'packages/store/dist/duckdb.js'));
const { readJsonColumns, loadColumnList } = await import(path.join(root, 'packages/store/dist/duckdb-migrations.js'));
const { payloadToRows, encodeLine } = await import(path.join(root, 'packages/shared/dist/rows.js'));
const { PriceEngine } = await import(path.join(root, 'packages/shared/dist/price-engine.js'));

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-checkpoint-'));
const file = path.join(dir, 'spans.duckdb');
fs.copyFileSync(path.join(o.reuse, 'spans.duckdb'), file);
const store = new DuckDbSpanStore({
  file,
  threads: 1,
  memoryLimit: '1GiB',
  checkpointThreshold: '1TB',
  rowGroupRows: o.rowGroupRows,
  storageVersion: o.storageVersion,
});
try {
  await store.start();
  // The store's file: its writer runs the bare inserts and the checkpoint.
  const duck = store.file;
  const [first] = await duck.rows('SELECT any_value(org_id) AS org FROM spans');
  const orgId = String(first?.org ?? 'org_bench');
  const engine = await PriceEngine.create({});
  const DAY = 86_400_000;
  const end = Date.now() - 60_000;
  let seed = 7;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const source = traces(o.rounds.reduce((a, b) => a + b, 0) * o.rows + 10_000, end, rand, end - Math.floor(end / DAY) * DAY);
  const cpuMs = () => {
    const c = process.cpuUsage();
    return (c.user + c.system) / 1000;
  };
  const logBytes = () => (fs.existsSync(`${file}.wal`) ? fs.statSync(`${file}.wal`).size : 0);
  const batch = path.join(dir, 'tmp', 'batch.ndjson');
  console.log(
    `${o.reuse}: ${o.spansOnly ? 'bare inserts into spans' : "the flusher's inserts"} of ${o.rows} rows, ` +
      `row groups of ${o.rowGroupRows ?? 8192}, storage ${o.storageVersion ?? 'v1.5.0'}`,
  );
  for (const inserts of o.rounds) {
    let [w, c] = [performance.now(), cpuMs()];
    for (let k = 0; k < inserts; k++) {
      const lines = [];
      while (lines.length < o.rows) {
        const { value: t } = source.next();
        const ctx = { orgId, keyPrefix: 'ti_bench', receivedAt: Date.now() };
        for (const r of payloadToRows({ version: 'v1', traces: [t] }, ctx, (s) => engine.price(s, orgId))) lines.push(encodeLine(r));
      }
      const buf = Buffer.from(lines.join('\n') + '\n');
      if (!o.spansOnly) await store.insertLines(buf, lines.length);
      else {
        fs.writeFileSync(batch, buf);
        await duck.run(
          `INSERT INTO spans BY NAME SELECT ${loadColumnList()} FROM read_json('${batch}', format = 'newline_delimited', columns = ${readJsonColumns()})`,
        );
      }
    }
    const [insertWall, insertCpu, log] = [(performance.now() - w) / Math.max(1, inserts), (cpuMs() - c) / Math.max(1, inserts), logBytes()];
    [w, c] = [performance.now(), cpuMs()];
    await duck.run('CHECKPOINT');
    console.log(
      `  ${inserts} inserts: ${insertWall.toFixed(0)} ms wall, ${insertCpu.toFixed(0)} ms CPU each; log ${(log / 2 ** 20).toFixed(1)} MiB; ` +
        `CHECKPOINT ${(performance.now() - w).toFixed(0)} ms wall, ${(cpuMs() - c).toFixed(0)} ms CPU`,
    );
  }
} finally {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
