import { DAY_MS, dayMs, floorDay, utcDay } from '@trace-ingest/shared/dates';
import { divRoundHalfEven, formatDecimal, parseDecimal } from '@trace-ingest/shared/decimal';
import { dailyCosts, usageReport, type GroupBy } from './reports.js';
import type { SpanStore } from './span-store.js';

/**
 * Where the month will end, and spend far above its usual, from the daily
 * rollups (never a scan of spans), in exact decimals. One method, read in
 * one sentence:
 *
 *   projected month-end = the spend of the month's days before today
 *                       + for today, the larger of today's spend so far and the daily run rate
 *                       + the daily run rate for each day left after today,
 *
 * where the daily run rate is the mean cost of the 14 complete UTC days
 * before today, weighted linearly to recent days (yesterday 14, two weeks ago
 * 1; days before the first day with spend left out). The projection changes
 * only with the data and the date, so the CLI, the API and the console agree.
 *
 * A spend anomaly: a subject's (customer's or model's) cost so far today is
 * at least `factor` times its baseline and at least `minUsd` above it, where
 * the baseline is the median of its 14 complete UTC days before today (days
 * without spend count as 0) and needs spend on at least 7 of them.
 */

export const RATE_DAYS = 14;
const PERCENT = 100n * 10n ** 18n;
/** A forecast is an estimate: its figures are given to 4 decimals (half even), as the console shows money. */
const FORECAST_UNIT = 10n ** 14n;
const round = (v: bigint): bigint => divRoundHalfEven(v, FORECAST_UNIT) * FORECAST_UNIT;

export interface Forecast {
  /** The month's expected spend by its last day (USD, exact decimal). */
  projectedUsd: string;
  /** The daily run rate the projection uses. */
  dailyRateUsd: string;
  /** The UTC day the spend is projected to reach the budget; null without a budget, when it already has, or not this month. */
  crossesOn: string | null;
}

export interface AnomalyRule {
  /** Today at least this many times the baseline (0 turns anomaly alerts off). */
  factor: bigint;
  /** ...and at least this much above it (scaled decimal). */
  minUsd: bigint;
}

export const DEFAULT_ANOMALY: AnomalyRule = { factor: 3n, minUsd: parseDecimal('1') };
const ANOMALY_MIN_DAYS = 7;

/** Days in the UTC month of a YYYY-MM-DD day. */
function monthLength(day: string): number {
  return new Date(Date.UTC(Number(day.slice(0, 4)), Number(day.slice(5, 7)), 0)).getUTCDate();
}

/**
 * The daily run rate of the days given (oldest first, the last one
 * yesterday): linearly weighted to recent days, days before the first with
 * spend left out, to 4 decimals; undefined when no day had spend.
 */
export function runRate(days: readonly bigint[]): bigint | undefined {
  const first = days.findIndex((c) => c !== 0n);
  if (first < 0) return undefined;
  const kept = days.slice(first);
  let num = 0n;
  let den = 0n;
  kept.forEach((c, i) => {
    const w = BigInt(RATE_DAYS - (kept.length - 1 - i));
    num += w * c;
    den += w;
  });
  return round(divRoundHalfEven(num, den));
}

/** The month-end projection as of `day` (YYYY-MM-DD), and the day it reaches `budget`. */
export function project(input: { day: string; spentBeforeToday: bigint; today: bigint; rate: bigint; budget?: bigint | undefined }): Forecast {
  const { day, spentBeforeToday, today, rate } = input;
  const daysAfter = BigInt(monthLength(day) - Number(day.slice(8, 10)));
  const endOfToday = spentBeforeToday + (today > rate ? today : rate);
  const projected = round(endOfToday + rate * daysAfter);
  let crossesOn: string | null = null;
  const b = input.budget;
  if (b !== undefined && spentBeforeToday + today < b) {
    if (endOfToday >= b) crossesOn = day;
    else if (rate > 0n) {
      const k = (b - endOfToday + rate - 1n) / rate;
      if (k <= daysAfter) crossesOn = utcDay(dayMs(day) + Number(k) * DAY_MS);
    }
  }
  return { projectedUsd: formatDecimal(projected), dailyRateUsd: formatDecimal(rate), crossesOn };
}

/** The 14 complete days before `today`'s, oldest first, from a map of day → cost (absent days are 0). */
function window(costs: ReadonlyMap<string, bigint> | undefined, todayMs: number): bigint[] {
  return Array.from({ length: RATE_DAYS }, (_, i) => costs?.get(utcDay(todayMs - (RATE_DAYS - i) * DAY_MS)) ?? 0n);
}

/**
 * The projection's error on past months: for each of the last `months`
 * months with spend, the projection made at the start of the same day of
 * that month, against what the month spent; the mean absolute error in
 * percent of the month's spend (one decimal), null when no month qualifies.
 */
export function backtest(daily: ReadonlyMap<string, bigint>, day: string, months = 3): { errorPct: string | null; months: number } {
  const y = Number(day.slice(0, 4));
  const m = Number(day.slice(5, 7)) - 1;
  let sum = 0n;
  let n = 0;
  for (let k = 1; k <= months; k++) {
    const start = Date.UTC(y, m - k, 1);
    const end = Date.UTC(y, m - k + 1, 1);
    const asOf = Math.min(start + (Number(day.slice(8, 10)) - 1) * DAY_MS, end - DAY_MS);
    let actual = 0n;
    let before = 0n;
    for (let t = start; t < end; t += DAY_MS) {
      const c = daily.get(utcDay(t)) ?? 0n;
      actual += c;
      if (t < asOf) before += c;
    }
    if (actual === 0n) continue;
    const rate = runRate(window(daily, asOf)) ?? 0n;
    const p = parseDecimal(project({ day: utcDay(asOf), spentBeforeToday: before, today: 0n, rate }).projectedUsd);
    const diff = p > actual ? p - actual : actual - p;
    sum += (diff * PERCENT) / actual;
    n++;
  }
  if (n === 0) return { errorPct: null, months: 0 };
  // One decimal, rounded half even, from the scaled percentage.
  const tenths = divRoundHalfEven(sum / BigInt(n), 10n ** 17n);
  return { errorPct: formatDecimal(tenths * 10n ** 17n), months: n };
}

/** The median of the 14 days (zeros count), when at least 7 had spend. */
export function baseline(days: readonly bigint[]): bigint | undefined {
  if (days.filter((c) => c !== 0n).length < ANOMALY_MIN_DAYS) return undefined;
  const s = [...days].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] ?? 0n) : divRoundHalfEven((s[mid - 1] ?? 0n) + (s[mid] ?? 0n), 2n);
}

/** Whether today's spend so far is an anomaly against the 14 days before (and the baseline it was measured against). */
export function anomalyOf(days: readonly bigint[], today: bigint, rule: AnomalyRule): { baseline: bigint } | undefined {
  if (rule.factor <= 0n) return undefined;
  const base = baseline(days);
  if (base === undefined) return undefined;
  return today >= rule.factor * base && today - base >= rule.minUsd ? { baseline: base } : undefined;
}

/** A group's spend: this month so far, today so far, and each of the 14 complete days before today. */
export interface GroupSpend {
  month: bigint;
  today: bigint;
  days: bigint[];
}

/** An org's spend by customer (or model) for forecasts and anomalies, read from the rollups. */
export interface SpendSnapshot {
  /** YYYY-MM and YYYY-MM-DD (UTC) of the moment read. */
  month: string;
  day: string;
  /** The org's whole spend, and each group's. */
  total: GroupSpend;
  groups: Map<string, GroupSpend>;
  readAt: number;
}

/**
 * Reads an org's spend by customer (or model): the month's, today's, and the
 * 14 days before today per group, in one read of the daily rollup (whole UTC
 * days, so the rollups answer whatever the number of spans): one query costs
 * less than a month's and a day's report apart (bench/budget-check.js).
 */
export async function readSpend(store: SpanStore, orgId: string, now: number, by: Extract<GroupBy, 'customer' | 'model'>): Promise<SpendSnapshot> {
  const today = floorDay(now);
  const d = new Date(now);
  const monthFrom = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  const monthTo = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  const first = today - RATE_DAYS * DAY_MS;
  // Days after today count in the month too (spans may start in the future), as `usage --month` counts them.
  const rows = await dailyCosts(store, { orgId, from: Math.min(first, monthFrom), to: Math.max(monthTo, today + DAY_MS), by });
  const blank = (): GroupSpend => ({ month: 0n, today: 0n, days: Array.from({ length: RATE_DAYS }, () => 0n) });
  const groups = new Map<string, GroupSpend>();
  const total = blank();
  for (const r of rows) {
    const t = Date.parse(`${r.day}T00:00:00Z`);
    const c = parseDecimal(r.cost);
    let g = groups.get(r.group);
    if (g === undefined) groups.set(r.group, (g = blank()));
    for (const s of [g, total]) {
      if (t >= monthFrom && t < monthTo) s.month += c;
      if (t === today) s.today += c;
      const i = Math.round((t - first) / DAY_MS);
      if (i >= 0 && i < RATE_DAYS) s.days[i] = (s.days[i] ?? 0n) + c;
    }
  }
  return { month: utcDay(now).slice(0, 7), day: utcDay(now), total, groups, readAt: now };
}

/** The month-end forecast of a group (or the org's total) of a snapshot. */
export function forecastOf(s: SpendSnapshot, g: GroupSpend | undefined, budget?: bigint): Forecast | null {
  if (g === undefined) return null;
  const rate = runRate(g.days);
  if (rate === undefined) return null;
  return project({ day: s.day, spentBeforeToday: g.month - g.today, today: g.today, rate, budget });
}

/**
 * The org's daily cost over the three months before this one and the 14 days
 * before them (what `backtest` reads): one small read of a day's rollup rows.
 */
export async function readHistory(store: SpanStore, orgId: string, now: number, months = 3): Promise<Map<string, bigint>> {
  const d = new Date(now);
  const from = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() - months, 1) - RATE_DAYS * DAY_MS;
  const to = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  const rows = await usageReport(store, { orgId, from, to, by: 'day' });
  return new Map(rows.map((r) => [r.group.slice(0, 10), parseDecimal(r.costs.total_cost)]));
}

/** An org's forecast as `usage` prints it and GET /v1/budget answers it: the org's, with its error on past months, and each customer's. */
export interface ForecastReport {
  month: string;
  /** The org's budget (the one that governs it), null without one. */
  budgetUsd: string | null;
  /** Spent so far this month. */
  spentUsd: string;
  org: (Forecast & { errorPct: string | null; errorMonths: number }) | null;
  customers: Record<string, Forecast>;
}

export function forecastReport(
  s: SpendSnapshot,
  history: ReadonlyMap<string, bigint>,
  budgetOf: (customerId: string) => bigint | undefined = () => undefined,
): ForecastReport {
  const budget = budgetOf('');
  const org = forecastOf(s, s.total, budget);
  const customers: Record<string, Forecast> = {};
  for (const [c, g] of s.groups) {
    if (c === '') continue;
    const f = forecastOf(s, g, budgetOf(c));
    if (f !== null) customers[c] = f;
  }
  const err = backtest(history, s.day);
  return {
    month: s.month,
    budgetUsd: budget === undefined ? null : formatDecimal(budget),
    spentUsd: formatDecimal(s.total.month),
    org: org === null ? null : { ...org, errorPct: err.errorPct, errorMonths: err.months },
    customers,
  };
}

/** A snapshot and its history as JSON (decimal strings), for the admin socket. */
export interface SpendJson {
  month: string;
  day: string;
  readAt: number;
  total: GroupJson;
  groups: Record<string, GroupJson>;
  history: Record<string, string>;
}
interface GroupJson {
  month: string;
  today: string;
  days: string[];
}

const groupJson = (g: GroupSpend): GroupJson => ({ month: formatDecimal(g.month), today: formatDecimal(g.today), days: g.days.map(formatDecimal) });
const groupOf = (j: GroupJson): GroupSpend => ({ month: parseDecimal(j.month), today: parseDecimal(j.today), days: j.days.map((d) => parseDecimal(d)) });

export function spendToJson(s: SpendSnapshot, history: ReadonlyMap<string, bigint>): SpendJson {
  return {
    month: s.month,
    day: s.day,
    readAt: s.readAt,
    total: groupJson(s.total),
    groups: Object.fromEntries([...s.groups].map(([g, v]) => [g, groupJson(v)])),
    history: Object.fromEntries([...history].map(([d, c]) => [d, formatDecimal(c)])),
  };
}

export function spendFromJson(j: SpendJson): { spend: SpendSnapshot; history: Map<string, bigint> } {
  return {
    spend: {
      month: j.month,
      day: j.day,
      readAt: j.readAt,
      total: groupOf(j.total),
      groups: new Map(Object.entries(j.groups).map(([g, v]) => [g, groupOf(v)])),
    },
    history: new Map(Object.entries(j.history).map(([d, c]) => [d, parseDecimal(c)])),
  };
}

/** What a forecast reads of an org: its spend by customer now, and its past months' daily cost. */
export async function readForecastInputs(store: SpanStore, orgId: string, now: number): Promise<SpendJson> {
  const [spend, history] = await Promise.all([readSpend(store, orgId, now, 'customer'), readHistory(store, orgId, now)]);
  return spendToJson(spend, history);
}
