import { describe, expect, it } from 'vitest';
import { addDays, ceilDay, checkedDay, DAY_MS, dayMs, daysBetween, eachDay, floorDay, parseDateOrTime, parseUtcDay, utcDay } from './dates.js';

describe('dates typed by people', () => {
  it('takes calendar days and refuses impossible ones instead of rolling them over', () => {
    expect(parseUtcDay('2026-11-30')).toBe(Date.UTC(2026, 10, 30));
    expect(parseUtcDay('2024-02-29')).toBe(Date.UTC(2024, 1, 29));
    for (const bad of ['2026-11-31', '2026-02-30', '2025-02-29', '2026-13-01', '2026-1-1', 'yesterday']) expect(parseUtcDay(bad), bad).toBeUndefined();
  });

  it('takes ISO timestamps, refusing one whose date part is impossible', () => {
    expect(parseDateOrTime('2026-02-28T10:00:00Z')).toBe(Date.UTC(2026, 1, 28, 10));
    expect(parseDateOrTime('2026-02-30T10:00:00Z')).toBeUndefined();
    expect(parseDateOrTime('2026-11-31')).toBeUndefined();
  });
});

describe('UTC days', () => {
  const d = Date.UTC(2026, 10, 26);

  it('writes the UTC day of an instant, on either side of midnight', () => {
    expect([utcDay(d - 1), utcDay(d), utcDay(d + DAY_MS - 1), utcDay(d + DAY_MS), utcDay(d - 1)]).toEqual([
      '2026-11-25',
      '2026-11-26',
      '2026-11-26',
      '2026-11-27',
      '2026-11-25',
    ]);
    expect(utcDay(Date.UTC(9999, 11, 31, 23, 59, 59, 999))).toBe('9999-12-31');
    expect(utcDay(0)).toBe('1970-01-01');
  });

  it('rounds an instant down and up to midnight, a midnight to itself', () => {
    expect([floorDay(d + 5), ceilDay(d + 5), floorDay(d), ceilDay(d)]).toEqual([d, d + DAY_MS, d, d]);
    expect(dayMs('2026-11-26')).toBe(d);
  });

  it('adds days across months and years, counts and lists the days of a range', () => {
    expect([addDays('2026-12-31', 1), addDays('2024-03-01', -1), addDays('2026-11-26', 0)]).toEqual(['2027-01-01', '2024-02-29', '2026-11-26']);
    expect([daysBetween('2026-11-29', '2026-12-02'), daysBetween('2026-12-02', '2026-11-29')]).toEqual([3, 0]);
    expect(eachDay('2026-11-29', '2026-12-02')).toEqual(['2026-11-29', '2026-11-30', '2026-12-01']);
    expect(eachDay('2026-11-29', '2026-11-29')).toEqual([]);
  });

  it('refuses a text that is no day before it reaches SQL', () => {
    for (const bad of ["2026-11-26' OR 1=1", '26/11/2026', '']) {
      expect(() => checkedDay(bad), bad).toThrow(/not a day/);
      expect(() => addDays(bad, 1), bad).toThrow(/not a day/);
    }
  });
});
