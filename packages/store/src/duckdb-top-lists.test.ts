import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it, onTestFinished } from 'vitest';
import { aroundSql, keptSql, rebuildTopListSql } from './duckdb-top-lists.js';
import { dateLiteral, TOP_LISTS, unmarkedDays } from './top-lists.js';

describe('top lists', () => {
  it('lists the days of a range that have no mark, across a month and a leap day', () => {
    expect(unmarkedDays('2028-02-27', '2028-03-02', new Set(['2028-02-28']))).toEqual(['2028-02-27', '2028-02-29', '2028-03-01']);
    expect(unmarkedDays('2026-10-05', '2026-10-05', new Set())).toEqual([]);
  });

  it('puts only day texts into SQL', () => {
    expect(dateLiteral('2026-10-05')).toBe("DATE '2026-10-05'");
    expect(() => dateLiteral("2026-10-05' OR '1'='1")).toThrow(/not a day/);
    expect(() => unmarkedDays('2026-10-05', 'tomorrow', new Set())).toThrow(/not a day/);
  });

  it('rebuilds nothing for no days, and marks exactly the days it rebuilt', () => {
    expect(rebuildTopListSql(TOP_LISTS.trace, "'org_a'", [], 10)).toEqual([]);
    const sql = rebuildTopListSql(TOP_LISTS.session, "'org_a'", ['2026-10-05', '2026-10-07'], 10).join(';\n');
    expect(sql).toContain("INSERT INTO session_top_days (org_id, start_date, group_count) SELECT 'org_a', v.d");
    expect(sql).toContain("VALUES (DATE '2026-10-05'), (DATE '2026-10-07')");
    // A session list keeps twice the ranks, and the cost of the first session past them as its floor.
    expect(sql).toContain('k.day_rank <= 20 OR k.multi');
    expect(sql).toContain('UPDATE session_top_days SET floor_cost = k.total_cost FROM ti_top_kept k');
    expect(sql).toContain('k.day_rank = 21');
    const traces = rebuildTopListSql(TOP_LISTS.trace, "'org_a'", ['2026-10-05'], 10).join(';\n');
    expect(traces).toContain('k.day_rank <= 10 OR k.multi');
    expect(traces).not.toContain('floor_cost');
  });

  it('reads the days around as ranges of days that leave out the days themselves, within the calendar', () => {
    expect(aroundSql(['2026-10-05'])).toBe(
      "(start_date BETWEEN DATE '2026-09-28' AND DATE '2026-10-04' OR start_date BETWEEN DATE '2026-10-06' AND DATE '2026-10-12')",
    );
    // Chunk days a gap apart: the gap is one range, the days themselves none.
    expect(aroundSql(['2026-10-05', '2026-10-07', '2026-10-08'])).toBe(
      "(start_date BETWEEN DATE '2026-09-28' AND DATE '2026-10-04' OR start_date BETWEEN DATE '2026-10-06' AND DATE '2026-10-06' " +
        "OR start_date BETWEEN DATE '2026-10-09' AND DATE '2026-10-15')",
    );
    expect(aroundSql(['0000-01-02'])).toBe(
      "(start_date BETWEEN DATE '0000-01-01' AND DATE '0000-01-01' OR start_date BETWEEN DATE '0000-01-03' AND DATE '0000-01-09')",
    );
    expect(aroundSql([])).toBe('false');
  });
});

describe('the kept groups of a rebuild', () => {
  /** Every group ranked by a window over the whole day, as a rebuild did before it found each day's cut first. */
  const BY_WINDOW = (ranks: number) =>
    'SELECT start_date, trace_id, total_cost, row_number() OVER (PARTITION BY start_date ORDER BY total_cost DESC, trace_id) AS day_rank, ' +
    `trace_id IN (SELECT trace_id FROM ti_top_multi) AS multi FROM ti_top_day QUALIFY day_rank <= ${ranks} OR multi`;

  it('keeps what ranking every group of the day keeps: ties at the cut, multi-day groups past it, short days, several days', async () => {
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    onTestFinished(() => {
      conn.closeSync();
      db.closeSync();
    });
    await conn.run('CREATE TEMP TABLE ti_top_day (start_date DATE, trace_id VARCHAR, total_cost DECIMAL(38, 18))');
    // Day 1: 40 groups, costs in steps with ties (5 groups per cost); day 2: 3 groups; day 3: every group costs 0.
    await conn.run(
      "INSERT INTO ti_top_day SELECT DATE '2026-10-05', 'a' || lpad(CAST(i AS VARCHAR), 2, '0'), CAST((i // 5) * 0.25 AS DECIMAL(38, 18)) FROM range(40) t(i)",
    );
    await conn.run("INSERT INTO ti_top_day VALUES (DATE '2026-10-06', 'b1', 2), (DATE '2026-10-06', 'b2', 1), (DATE '2026-10-06', 'b3', 1)");
    await conn.run("INSERT INTO ti_top_day SELECT DATE '2026-10-07', 'c' || CAST(i AS VARCHAR), 0 FROM range(12) t(i)");
    // Multi-day groups far below any cut, at the cut, and near the top.
    await conn.run("CREATE TEMP TABLE ti_top_multi AS SELECT * FROM (VALUES ('a00'), ('a21'), ('a38'), ('b3'), ('c11')) v(trace_id)");
    const rows = async (sql: string) =>
      (
        await conn.runAndReadAll(
          `SELECT CAST(start_date AS VARCHAR) AS d, trace_id, CAST(total_cost AS VARCHAR) AS c, day_rank, multi FROM (${sql}) ORDER BY ALL`,
        )
      )
        .getRowObjectsJson()
        .map((r) => ({
          d: String(r.d),
          trace_id: String(r.trace_id),
          c: String(r.c),
          multi: r.multi === true,
          day_rank: r.day_rank === null ? null : Number(r.day_rank),
        }));
    for (const ranks of [0, 1, 3, 7, 8, 11, 40, 41, 100]) {
      for (const sql of keptSql('trace_id', ranks)) await conn.run(sql);
      const kept = await rows('SELECT * FROM ti_top_kept');
      const expected = await rows(BY_WINDOW(ranks));
      // The same groups, with the same ranks, except a multi-day group past the ranked ones: reads take it at any rank.
      expect(kept.map((r) => [r.d, r.trace_id, r.c, r.multi])).toEqual(expected.map((r) => [r.d, r.trace_id, r.c, r.multi]));
      for (const [i, r] of kept.entries()) {
        const e = expected[i];
        if (r.day_rank === null) expect(r.multi && e !== undefined && Number(e.day_rank) > ranks).toBe(true);
        else expect(r.day_rank).toBe(e?.day_rank);
      }
      expect(kept.filter((r) => r.day_rank !== null).length).toBeGreaterThanOrEqual(expected.filter((r) => Number(r.day_rank) <= ranks).length);
    }
  });
});
