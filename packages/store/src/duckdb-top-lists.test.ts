import { describe, expect, it } from 'vitest';
import { aroundSql, rebuildTopListSql } from './duckdb-top-lists.js';
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
