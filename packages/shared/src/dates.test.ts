import { describe, expect, it } from 'vitest';
import { parseDateOrTime, parseUtcDay } from './dates.js';

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
