// npm run bench -- --busy-lists [--rows 2000000] [--read-at 50000] [--rounds 5] [--store label=path/to/packages/store/dist ...] [--profile] [--keep]
//
// Today's top lists on the embedded store while a busy day fills, in process (the flusher's insertLines, DuckDB with
// 1 thread and 1 GiB): realistic rows of bench/realistic.js, every start today before now, in 5,000-row inserts of
// live traffic (30% of an insert's traces send their last two spans in the next one). After --read-at rows one
// ranking by trace and by session (limit 1,000, as `usage`) reads today, as a console would; then the day fills
// unread to --rows; then the first rankings after that load, and --rounds rounds of an insert and both rankings.
// Prints insert CPU µs per row (process.cpuUsage: DuckDB's thread included) per 500k rows of the unread load, the
// first rankings, and the rounds' medians. Each --store (default: this tree's) runs in its own child process, all at
// once, so two builds side by side share the machine alike. --profile adds ms per insert of each statement kind, and
// ms of each statement of the first rankings. --read-at 0 reads nothing before them (the lists are built then).
// --keep leaves the store's directory.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { traces } from './realistic.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const argv = process.argv.slice(2).filter((a) => a !== '--busy-lists');
const o = { rows: 2_000_000, readAt: 50_000, rounds: 5, stores: [], profile: false, keep: false, child: undefined };
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--rows') o.rows = Number(argv[++i]);
  else if (a === '--read-at') o.readAt = Number(argv[++i]);
  else if (a === '--rounds') o.rounds = Number(argv[++i]);
  else if (a === '--profile') o.profile = true;
  else if (a === '--keep') o.keep = true;
  else if (a === '--store') {
    const [label, dist] = argv[++i].split('=');
    o.stores.push({ label, dist: path.resolve(dist) });
  } else if (a === '--child') o.child = argv[++i];
  else throw new Error(`unknown argument "${a}" (--rows n --read-at n --rounds n --store label=dist --profile --keep)`);
}

if (o.child === undefined) {
  if (o.stores.length === 0) o.stores.push({ label: 'this', dist: path.join(root, 'packages/store/dist') });
  const runs = o.stores.map(
    (s) =>
      new Promise((resolve, reject) => {
        const args = [fileURLToPath(import.meta.url), '--child', s.dist, '--rows', String(o.rows), '--read-at', String(o.readAt), '--rounds', String(o.rounds)];
        if (o.profile) args.push('--profile');
        if (o.keep) args.push('--keep');
        const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
        child.stdout.on('data', (d) => {
          for (const line of String(d).split('\n').filter(Boolean)) console.log(`${s.label}: ${line}`);
        });
        child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${s.label} exited with ${code}`))));
      }),
  );
  await Promise.all(runs);
} else {
  const { DuckDbSpanStore } = await import(path.join(o.child, 'duckdb.js'));
  const { usageReport } = await import(path.join(o.child, 'reports.js'));
  const { payloadToRows, encodeLine } = await import(path.join(root, 'packages/shared/dist/rows.js'));
  const { PriceEngine } = await import(path.join(root, 'packages/shared/dist/price-engine.js'));
  const engine = await PriceEngine.create({});
  const orgId = 'org_bench';
  const price = (s) => engine.price(s, orgId);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-busy-lists-'));
  const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), threads: 1, memoryLimit: '1GiB' });
  await store.start();
  const prof = new Map();
  let profiling = false;
  if (o.profile) {
    // The store's file runs every statement: timed per kind (literals and numbers blanked).
    const file = store.file;
    for (const m of ['run', 'rows']) {
      const inner = file[m].bind(file);
      file[m] = async (sql, ...rest) => {
        const t = performance.now();
        try {
          return await inner(sql, ...rest);
        } finally {
          if (profiling) {
            const k = sql
              .replace(/'[^']*'/g, "'?'")
              .replace(/\d+/g, 'N')
              .slice(0, 70);
            const e = prof.get(k) ?? [0, 0];
            e[0] += performance.now() - t;
            e[1]++;
            prof.set(k, e);
          }
        }
      };
    }
  }
  const DAY = 86_400_000;
  const now = Date.now();
  const today = Math.floor(now / DAY) * DAY;
  const end = now - 60_000;
  let seed = 42;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const source = traces(o.rows + (o.rounds + 2) * 5000, end, rand, end - today);
  const rowsOf = (trace, spans) =>
    payloadToRows({ version: 'v1', traces: [{ ...trace, spans }] }, { orgId, keyPrefix: 'ti_bench', receivedAt: Date.now() }, price);
  let held = [];
  let stored = 0;
  const batch = () => {
    const lines = held.map((r) => encodeLine(r));
    held = [];
    while (lines.length < 5000) {
      const { value: t, done } = source.next();
      if (done) break;
      const late = rand() < 0.3 && t.spans.length > 2;
      for (const r of rowsOf(t, late ? t.spans.slice(0, -2) : t.spans)) lines.push(encodeLine(r));
      if (late) held.push(...rowsOf(t, t.spans.slice(-2)));
    }
    return lines;
  };
  const insert = async () => {
    const lines = batch();
    const c0 = process.cpuUsage();
    await store.insertLines(Buffer.from(lines.join('\n') + '\n'), lines.length);
    const c = process.cpuUsage(c0);
    stored += lines.length;
    return (c.user + c.system) / lines.length;
  };
  const rank = async (by) => {
    const t0 = performance.now();
    await usageReport(store, { orgId, from: today, to: Date.now() + 1, by, limit: 1000 });
    return performance.now() - t0;
  };
  /** The statements timed since the last print, slowest first, in ms divided by `per`. */
  const printProfile = (per, unit) => {
    for (const [k, [ms, n]] of [...prof].sort((a, b) => b[1][0] - a[1][0]).slice(0, 25))
      console.log(`${f(ms / per).padStart(7)} ${unit} ${String(n).padStart(6)}x ${k}`);
    prof.clear();
  };
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  const f = (x) => x.toFixed(1);
  while (stored < o.readAt) await insert();
  // --read-at 0: nobody read the day, so its lists were never built and the first rankings build them.
  if (o.readAt > 0) console.log(`read at ${stored} spans: by trace ${f(await rank('trace'))} ms, by session ${f(await rank('session'))} ms`);
  const t0 = performance.now();
  let chunk = [];
  let next = 500_000;
  profiling = o.profile;
  const loaded = stored;
  while (stored < o.rows) {
    chunk.push(await insert());
    if (stored >= next || stored >= o.rows) {
      const s = Math.round((performance.now() - t0) / 1000);
      console.log(`unread to ${stored}: insert CPU median ${f(median(chunk))} µs/row (${s} s)`);
      chunk = [];
      next += 500_000;
    }
  }
  profiling = false;
  const inserts = (stored - loaded) / 5000;
  printProfile(inserts, 'ms/insert');
  profiling = o.profile;
  const firstByTrace = await rank('trace');
  const firstBySession = await rank('session');
  profiling = false;
  console.log(`first after the unread load, ${stored} spans: by trace ${f(firstByTrace)} ms, by session ${f(firstBySession)} ms`);
  printProfile(1, 'ms');
  const cpu = [];
  const byTrace = [];
  const bySession = [];
  for (let i = 0; i < o.rounds; i++) {
    cpu.push(await insert());
    byTrace.push(await rank('trace'));
    bySession.push(await rank('session'));
  }
  console.log(
    `rounds: insert CPU ${f(median(cpu))} µs/row, by trace ${f(median(byTrace))} ms (slowest ${f(Math.max(...byTrace))}), ` +
      `by session ${f(median(bySession))} ms (slowest ${f(Math.max(...bySession))})`,
  );
  await store.close();
  if (o.keep) console.log(`kept ${dir}`);
  else fs.rmSync(dir, { recursive: true, force: true });
}
