import { describe, expect, it } from 'vitest';
import { formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { anomalyOf, backtest, baseline, DEFAULT_ANOMALY, project, runRate } from './forecast.js';

const usd = (s: string) => parseDecimal(s);
const days = (...xs: string[]) => xs.map(usd);

describe('daily run rate', () => {
  it('weighs the 14 days linearly to recent ones, to 4 decimals', () => {
    // 13 days of $1 then yesterday $15: (1*(1+...+13) + 15*14) / 105 = (91 + 210) / 105 = 2.8666...
    const r = runRate([...Array.from({ length: 13 }, () => usd('1')), usd('15')]);
    expect(formatDecimal(r ?? 0n)).toBe('2.8667');
  });

  it('leaves out the days before the first with spend, and has no rate without any', () => {
    // Only the last two days had spend: weights 13 and 14, (13 * 2.7 + 14 * 1.35) / 27.
    expect(formatDecimal(runRate([...Array.from({ length: 12 }, () => 0n), usd('2.7'), usd('1.35')]) ?? 0n)).toBe('2');
    expect(runRate(Array.from({ length: 14 }, () => 0n))).toBeUndefined();
  });
});

describe('month-end projection', () => {
  it('adds the rate for each day left, today at least what it has spent', () => {
    // 30 November: today and nothing after.
    expect(project({ day: '2026-11-30', spentBeforeToday: usd('100'), today: usd('1'), rate: usd('4') }).projectedUsd).toBe('104');
    expect(project({ day: '2026-11-30', spentBeforeToday: usd('100'), today: usd('9'), rate: usd('4') }).projectedUsd).toBe('109');
    // 10 February 2027 (28 days): today + 18 days left.
    const f = project({ day: '2027-02-10', spentBeforeToday: usd('45.5'), today: usd('0.25'), rate: usd('5.05'), budget: usd('100') });
    expect(f).toEqual({ projectedUsd: '141.45', dailyRateUsd: '5.05', crossesOn: '2027-02-20' });
  });

  it('says on which day the budget is reached: today, a later day, not this month, or already', () => {
    const at = (budget: string, spent = '45.5', today = '0.25') =>
      project({ day: '2027-02-10', spentBeforeToday: usd(spent), today: usd(today), rate: usd('5.05'), budget: usd(budget) }).crossesOn;
    // End of today: 45.5 + 5.05 = 50.55.
    expect(at('50.55')).toBe('2027-02-10');
    expect(at('50.56')).toBe('2027-02-11');
    // 50.55 + 18 * 5.05 = 141.45, the month's last day.
    expect(at('141.45')).toBe('2027-02-28');
    expect(at('141.46')).toBeNull();
    expect(at('45', '44', '1.5')).toBeNull();
  });
});

describe('the error of the projection on past months', () => {
  it('is the mean absolute error of the projection made on the same day of each past month', () => {
    const daily = new Map<string, bigint>();
    const put = (from: string, to: string, cost: string) => {
      for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86_400_000)
        daily.set(new Date(t).toISOString().slice(0, 10), usd(cost));
    };
    // A flat $2 a day from mid-July to August, then September's second half at $4.
    put('2026-07-15', '2026-08-31', '2');
    put('2026-09-01', '2026-09-15', '2');
    put('2026-09-16', '2026-09-30', '4');
    // As of 10 October: August projected 62 (exact, 0%), September 2 * 9 + 2 * 21 = 60 against 90 (33.3%); July has no spend
    // before the 15th, so its projection at the 10th (no rate: 0) is 100% off: mean (0 + 33.33 + 100) / 3.
    expect(backtest(daily, '2026-10-10')).toEqual({ errorPct: '44.4', months: 3 });
    expect(backtest(new Map(), '2026-10-10')).toEqual({ errorPct: null, months: 0 });
  });

  it("takes the month's last day when it has fewer days than the day asked", () => {
    const daily = new Map<string, bigint>();
    for (let t = Date.parse('2027-01-15T00:00:00Z'); t < Date.parse('2027-03-01T00:00:00Z'); t += 86_400_000)
      daily.set(new Date(t).toISOString().slice(0, 10), usd('1'));
    // As of 31 March, February is projected from its 28th: 27 + 1 = 28, exactly.
    expect(backtest(daily, '2027-03-31', 1)).toEqual({ errorPct: '0', months: 1 });
  });
});

describe('spend anomaly', () => {
  const steady = days('1', '1.2', '0.9', '1', '1.1', '1', '0.8', '1', '1.3', '1', '0.9', '1', '1', '1.1');

  it('is today at least three times the median of the 14 days before, and at least $1 above it', () => {
    expect(formatDecimal(baseline(steady) ?? 0n)).toBe('1');
    expect(anomalyOf(steady, usd('3'), DEFAULT_ANOMALY)).toEqual({ baseline: usd('1') });
    expect(anomalyOf(steady, usd('2.99'), DEFAULT_ANOMALY)).toBeUndefined();
    // Three times a small baseline is not enough: $0.30 against $0.10 is less than $1 above it.
    expect(
      anomalyOf(
        steady.map((c) => c / 10n),
        usd('0.3'),
        DEFAULT_ANOMALY,
      ),
    ).toBeUndefined();
    expect(anomalyOf(steady, usd('100'), { ...DEFAULT_ANOMALY, factor: 0n })).toBeUndefined();
  });

  it('needs spend on at least 7 of the 14 days: a new customer has no baseline', () => {
    const young = [...Array.from({ length: 8 }, () => 0n), ...days('1', '1', '1', '1', '1', '1')];
    expect(baseline(young)).toBeUndefined();
    expect(anomalyOf(young, usd('50'), DEFAULT_ANOMALY)).toBeUndefined();
    // Seven days with spend and seven without: the median is halfway between 0 and the smallest.
    const half = [...Array.from({ length: 7 }, () => 0n), ...days('2', '2', '2', '2', '2', '2', '2')];
    expect(formatDecimal(baseline(half) ?? 0n)).toBe('1');
  });
});
