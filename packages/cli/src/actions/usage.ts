import { DAY_MS, utcDay } from '@trace-ingest/shared/dates';
import { UsageError } from '@trace-ingest/shared/errors';
import { UnknownNameError } from '@trace-ingest/store/control-store';
import { usageTotals, type GroupBy, type RepriceResult, type UsageRow } from '@trace-ingest/store/reports';
import type { QueryRow } from '@trace-ingest/store/span-store';
import { parseDecimal } from '@trace-ingest/shared/decimal';
import { governing } from '@trace-ingest/store/budgets';
import { forecastReport, spendFromJson, type ForecastReport } from '@trace-ingest/store/forecast';
import type { CliContext } from '../context.js';
import { openSpanAccess } from '../span-access.js';
import { withBudgets } from './budgets.js';
import { parseDate } from './prices.js';

export interface Window {
  month?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
}

/** A report window: a UTC month (default: this one) or [from, to) dates. */
export function resolveWindow(w: Window, now = Date.now()): { from: number; to: number } {
  if (w.month !== undefined && (w.from !== undefined || w.to !== undefined)) throw new UsageError('give --month or --from/--to, not both');
  if (w.from !== undefined || w.to !== undefined) {
    if (w.from === undefined) throw new UsageError('--to needs --from');
    const from = parseDate(w.from, '--from');
    // A bare --to date includes that whole day.
    const to = w.to === undefined ? now + 1 : parseDate(w.to, '--to') + (/^\d{4}-\d{2}-\d{2}$/.test(w.to) ? DAY_MS : 0);
    if (to <= from) throw new UsageError('--to must be after --from');
    return { from, to };
  }
  const month = w.month ?? new Date(now).toISOString().slice(0, 7);
  const m = /^(\d{4})-(\d{2})$/.exec(month);
  if (m === null || Number(m[2]) < 1 || Number(m[2]) > 12) throw new UsageError(`--month must be YYYY-MM (got ${month})`);
  const from = Date.UTC(Number(m[1]), Number(m[2]) - 1, 1);
  return { from, to: Date.UTC(Number(m[1]), Number(m[2]), 1) };
}

export async function orgIdOf(ctx: CliContext, org: string): Promise<string> {
  const o = await (await ctx.keys()).getOrg(org);
  if (o === null) throw new UnknownNameError('org', org);
  return o.id;
}

export async function usage(ctx: CliContext, input: UsageInput): Promise<UsageRow[]> {
  return (await usageInWindow(ctx, input)).rows;
}

type UsageInput = Window & { org: string; by: GroupBy; customer?: string | undefined; limit?: number | undefined };

/**
 * The report (the `limit` groups of the largest cost), its total over every
 * group, the window it covers and the org's id (what the table prints around it).
 */
export async function usageInWindow(
  ctx: CliContext,
  input: UsageInput,
): Promise<{ rows: UsageRow[]; total: UsageRow; truncated: boolean; window: { from: number; to: number }; orgId: string }> {
  // The dates are checked before any store is opened: a typo is reported as itself.
  const window = resolveWindow(input);
  const access = await openSpanAccess(ctx);
  const id = await orgIdOf(ctx, input.org);
  const filter = { orgId: id, ...window, customerId: input.customer };
  const rows = await access.usage({ ...filter, by: input.by, limit: input.limit });
  const truncated = input.limit !== undefined && rows.length >= input.limit;
  // Cut short, the rows do not add up to the total: the days do (a year at most 366 rows, from the rollups).
  const total = usageTotals(truncated ? await access.usage({ ...filter, by: 'day' }) : rows);
  return { rows, total, truncated, window, orgId: id };
}

/** Whether a window is the current UTC month, the one a month-end forecast speaks of. */
export function isThisMonth(w: { from: number; to: number }, now = Date.now()): boolean {
  const d = new Date(now);
  return w.from === Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1) && w.to === Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/**
 * The org's month-end forecast and each customer's (store/forecast.ts), with
 * the day each budget is projected to be reached: the same figures as
 * GET /v1/budget and the console.
 */
export async function usageForecast(ctx: CliContext, orgId: string, now = Date.now()): Promise<ForecastReport> {
  const { spend, history } = spendFromJson(await (await openSpanAccess(ctx)).forecastInputs(orgId, now));
  const budgets = await withBudgets(ctx, (b) => b.list(orgId));
  return forecastReport(spend, history, (customer) => {
    const b = governing(budgets, orgId, customer);
    return b === undefined ? undefined : parseDecimal(b.monthlyUsd);
  });
}

/** For an empty range: where the org's spans are, if it has any (by start time, as reports count them). */
export async function whereSpansAre(ctx: CliContext, orgId: string): Promise<string> {
  const [r] = await (
    await openSpanAccess(ctx)
  ).sql('SELECT count(*) AS n, min(start_time) AS first, max(start_time) AS last FROM spans WHERE org_id = ?', [orgId]);
  const n = Number(r?.n ?? 0);
  if (n === 0) return 'no spans in this range; the org has none stored yet';
  const day = (v: unknown) => utcDay(Number(v));
  return `no spans in this range; the org's ${n} span(s) started from ${day(r?.first)} to ${day(r?.last)} (give --from/--to or --month)`;
}

/**
 * A read-only query, at most `limit` rows of it: a query over a year of spans
 * must not hold them all in this process (or the server's). `more` says rows
 * were left out.
 */
export async function sql(ctx: CliContext, query: string, limit = 10_000): Promise<{ rows: QueryRow[]; more: boolean }> {
  const rows = await (await openSpanAccess(ctx, { readOnly: true })).sql(query, [], limit + 1);
  return { rows: rows.slice(0, limit), more: rows.length > limit };
}

export async function repriceSpans(
  ctx: CliContext,
  input: { org: string; from: string; to?: string | undefined; model?: string | undefined },
): Promise<RepriceResult> {
  const window = resolveWindow({ from: input.from, to: input.to });
  const access = await openSpanAccess(ctx);
  return access.reprice({ orgId: await orgIdOf(ctx, input.org), ...window, model: input.model });
}
