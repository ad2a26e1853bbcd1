// node bench/probe-advance.js --file DIR/spans.duckdb [--changed 5000,25000,100000] [--rounds 3]
//
// What a lapsed day's list would cost if a read (or a background pass) advanced it from the groups that changed since
// its mark instead of rebuilding it, on a store kept by `--busy-lists --keep` (its busiest org and day). The stores
// keep no insertion sequence in their rollups, so the last N rows of `traces` / `sessions_daily` by rowid stand for
// "written since the mark" (a probe only: DuckDB's rowids are renumbered by a vacuum). Per list and N, one DuckDB
// thread, each in a transaction rolled back: the changed groups picked from those rows, their whole rows of the day
// read from the rollup (a semi-join over the day's rows) into the list's touches, and the advance of the list from its
// touches (advanceFromTouchesSql, the trace list's, for both); against the list's rebuild (rebuildTopListSql). Prints ms.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { median } from './report.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const argv = process.argv.slice(2);
const o = { file: undefined, changed: [5000, 25000, 100000], rounds: 3 };
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--file') o.file = path.resolve(argv[++i]);
  else if (a === '--changed') o.changed = argv[++i].split(',').map(Number);
  else if (a === '--rounds') o.rounds = Number(argv[++i]);
  else throw new Error(`unknown argument "${a}" (--file spans.duckdb --changed n,n --rounds n)`);
}
if (o.file === undefined) throw new Error('--file is required: a spans.duckdb kept by `npm run bench -- --busy-lists --keep`');

const { DuckDBInstance } = await import('@duckdb/node-api');
const { advanceFromTouchesSql, rebuildTopListSql } = await import(path.join(root, 'packages/store/dist/duckdb-top-lists.js'));
const { TOP_LISTS, TOP_LISTS_PER_DAY } = await import(path.join(root, 'packages/store/dist/top-lists.js'));
const { MEASURES } = await import(path.join(root, 'packages/shared/dist/rollups.js'));
const { sqlString } = await import(path.join(root, 'packages/store/dist/duckdb-file.js'));

const db = await DuckDBInstance.create(o.file, { threads: '1' });
const c = await db.connect();
const one = async (sql) => (await c.runAndReadAll(sql)).getRowObjectsJS()[0];
const timed = async (sqls) => {
  const t = performance.now();
  for (const s of sqls) await c.run(s);
  return performance.now() - t;
};

const { org_id: orgId, d: day } = await one('SELECT org_id, CAST(start_date AS VARCHAR) AS d FROM traces GROUP BY ALL ORDER BY count(*) DESC LIMIT 1');
const org = sqlString(String(orgId));
const where = `org_id = ${org} AND start_date = DATE '${day}'`;

for (const l of [TOP_LISTS.trace, TOP_LISTS.session]) {
  // The trace list's advance (touches holding whole rows) serves both: here every touch is a whole row of its day.
  const asRows = { ...l, touchKind: 'rows' };
  const size = await one(`SELECT count(*) AS n, max(rowid) AS r, count(DISTINCT ${l.group}) AS g FROM ${l.source} WHERE ${where}`);
  console.log(`${l.source}, ${day}: ${size.n} rows, ${size.g} groups`);
  const cols = ['org_id', 'start_date', l.group, ...MEASURES.map((m) => m.name), ...l.extras, 'fresh'].join(', ');
  const sums = [...MEASURES.map((m) => `sum(${m.name})`), ...l.extras.map((e) => `min(${e})`)].join(', ');
  const res = { rebuild: [] };
  for (let round = 0; round < o.rounds; round++) {
    for (const n of o.changed) {
      const cut = Number(size.r) - n;
      await c.run('BEGIN');
      await c.run(`DELETE FROM ${l.touches}`);
      const pick = await timed([
        `CREATE OR REPLACE TEMP TABLE ti_probe_changed AS SELECT DISTINCT ${l.group} FROM ${l.source} WHERE ${where} AND rowid > ${cut}`,
      ]);
      const whole = await timed([
        `INSERT INTO ${l.touches} (${cols}) SELECT org_id, start_date, ${l.group}, ${sums}, bool_and(rowid > ${cut}) ` +
          `FROM ${l.source} WHERE ${where} AND ${l.group} IN (SELECT ${l.group} FROM ti_probe_changed) GROUP BY org_id, start_date, ${l.group}`,
      ]);
      const groups = Number((await one(`SELECT count(*) AS n FROM ${l.touches}`)).n);
      const advance = await timed(advanceFromTouchesSql(asRows, org, day, TOP_LISTS_PER_DAY));
      await c.run('ROLLBACK');
      (res[n] ??= { groups, pick: [], whole: [], advance: [] }).pick.push(pick);
      res[n].whole.push(whole);
      res[n].advance.push(advance);
    }
    await c.run('BEGIN');
    res.rebuild.push(await timed(rebuildTopListSql(l, org, [day], TOP_LISTS_PER_DAY)));
    await c.run('ROLLBACK');
  }
  for (const n of o.changed) {
    const r = res[n];
    const total = r.pick.map((p, i) => p + r.whole[i] + r.advance[i]);
    console.log(
      `  last ${n} rows (${r.groups} groups): pick ${median(r.pick).toFixed(0)}, whole rows ${median(r.whole).toFixed(0)}, ` +
        `advance ${median(r.advance).toFixed(0)}, all ${median(total).toFixed(0)} ms (median of ${o.rounds})`,
    );
  }
  console.log(`  rebuild ${median(res.rebuild).toFixed(0)} ms (median of ${o.rounds}; ${res.rebuild.map((x) => x.toFixed(0)).join(' / ')})`);
}
c.closeSync();
