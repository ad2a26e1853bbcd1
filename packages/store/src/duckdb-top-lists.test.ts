import { describe, expect, it } from 'vitest';
import { rebuildTopListSql } from './duckdb-top-lists.js';
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
    expect(sql).toContain("INSERT INTO session_top_days SELECT 'org_a', v.d");
    expect(sql).toContain("VALUES (DATE '2026-10-05'), (DATE '2026-10-07')");
    expect(sql).toContain('day_rank <= 10 OR multi');
  });
});
