import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buf, expectRollupsEqualScan, scanning, traffic } from '../../../test/rollup-traffic.js';
import { DuckDbSpanStore } from './duckdb.js';
import { usageReport } from './reports.js';

/** The rowids from which the store's folds of `traces` by rowid start, as it runs them. */
function watchFolds(store: DuckDbSpanStore): number[] {
  const since: number[] = [];
  // Every write statement goes through the store's file (duckdb-file.ts).
  const file = (store as unknown as { file: { run: (sql: string) => Promise<number> } }).file;
  const run = file.run.bind(file);
  file.run = (sql: string) => {
    const m = /^DELETE FROM traces WHERE rowid >= (\d+)$/.exec(sql);
    if (m !== null) since.push(Number(m[1]));
    return run(sql);
  };
  return since;
}

// Each check compares many reports with a scan: slow when the machine is shared with the integration tests.
describe('a DuckDB file written by one store and opened by another', { timeout: 120_000 }, () => {
  let dir: string;
  let stores: DuckDbSpanStore[];
  // A small compaction threshold, so partial and folded rows both occur; top lists of three a day.
  const open = async () => {
    const store = new DuckDbSpanStore({ file: path.join(dir, 'spans.duckdb'), compactRows: 150, topListsPerDay: 3 });
    stores.push(store);
    await store.start();
    return store;
  };
  const range = { orgId: 'org_a', from: Date.parse('2026-10-01T00:00:00Z'), to: Date.parse('2026-10-12T00:00:00Z') };
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-duck-reopen-'));
    stores = [];
  });
  afterEach(async () => {
    for (const s of stores) await s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('notes the groups a second store adds to on a day the first store marked, and ranks them as a scan does', async () => {
    const first = await open();
    const batches = traffic(7);
    for (const b of batches) await first.insertLines(buf(b.rows), b.rows.length);
    // Rankings of up to three read the lists: building them marks their days current.
    for (const by of ['trace', 'session'] as const) await usageReport(first, { ...range, by, limit: 1 });
    const row = batches.flatMap((b) => b.rows).find((r) => r.session_id !== '')!;
    const day = row.start_date;
    const marks = (store: DuckDbSpanStore) =>
      store.query(
        'SELECT (SELECT count(*) FROM trace_top_days WHERE start_date = ?::DATE)::INTEGER AS trace, ' +
          '(SELECT count(*) FROM session_top_days WHERE start_date = ?::DATE)::INTEGER AS session',
        [day, day],
      );
    expect(await marks(first)).toEqual([{ trace: 1, session: 1 }]);
    await first.close();

    const second = await open();
    // A costly span of a new trace in a known session, on the marked day: it now ranks first by trace and by session.
    const costly = { ...row, trace_id: 'late-trace', span_id: 'late-span', parent_span_id: '', total_cost: '25', output_cost: '25' };
    await second.insertLines(buf([costly]), 1);
    // The marks stay: the new span only adds to its trace and session, noted as touches of that day.
    expect(await marks(second)).toEqual([{ trace: 1, session: 1 }]);
    const touches = await second.query(
      'SELECT (SELECT list(trace_id) FROM trace_top_touches WHERE start_date = ?::DATE) AS trace, ' +
        '(SELECT list(session_id) FROM session_top_touches WHERE start_date = ?::DATE) AS session',
      [day, day],
    );
    expect(touches).toEqual([{ trace: ['late-trace'], session: [row.session_id] }]);
    const byTrace = await usageReport(second, { ...range, by: 'trace', limit: 1 });
    expect(byTrace[0]?.group).toBe('late-trace');
    const bySession = await usageReport(second, { ...range, by: 'session', limit: 1 });
    expect(bySession[0]?.group).toBe(row.session_id);
    for (const by of ['trace', 'session'] as const)
      for (const limit of [1, 3]) {
        const f = { ...range, by, limit };
        expect(await usageReport(second, f), `${by} limit ${limit}`).toEqual(await usageReport(scanning(second), f));
      }
  });

  it('folds its own partial rollup rows, and every row once folding whole, when the first left rows unfolded', async () => {
    const batches = traffic(7);
    const first = await open();
    for (const b of batches.slice(0, 3)) await first.insertLines(buf(b.rows), b.rows.length);
    const partial = async (store: DuckDbSpanStore) => {
      const [r] = await store.query('SELECT count(*)::INTEGER AS rows, count(DISTINCT (org_id, trace_id, start_date))::INTEGER AS keys FROM traces');
      return Number(r?.rows) - Number(r?.keys);
    };
    // The first store stops with rows its next fold would have taken.
    expect(await partial(first)).toBeGreaterThan(0);
    await first.close();

    const second = await open();
    const [atOpen] = await second.query('SELECT max(rowid)::INTEGER AS m FROM traces');
    const folds = watchFolds(second);
    await expectRollupsEqualScan(second);
    // Enough rows for the second store's own folds, and the first batches re-sent: nothing of them is stored twice.
    for (const b of [...batches.slice(3), ...batches.slice(0, 3)]) {
      await second.insertLines(buf(b.rows), b.rows.length);
      await expectRollupsEqualScan(second);
    }
    // The second store's folds by rowid start after the rows it found at open: the first store's rows are left as they are.
    expect(folds.length).toBeGreaterThan(0);
    for (const since of folds) expect(since).toBeGreaterThan(Number(atOpen?.m));
    await second.compactRollups();
    await expectRollupsEqualScan(second);
    expect(await partial(second)).toBe(0);
    await second.close();

    const third = await open();
    await expectRollupsEqualScan(third);
  });
});
