import type { Command } from 'commander';
import { z } from 'zod';
import { utcDay } from '@trace-ingest/shared/dates';
import { UsageError } from '@trace-ingest/shared/errors';
import { toCsv, usageCsvRow } from '@trace-ingest/shared/csv';
import { GROUPS } from '@trace-ingest/store/reports';
import { parseDecimal } from '@trace-ingest/shared/decimal';
import { exportSpans } from '../actions/export.js';
import { isThisMonth, repriceSpans, sql, usageForecast, usageInWindow, whereSpansAre } from '../actions/usage.js';
import { REPRICE_DUCKDB_MEMORY } from '../context.js';
import type { Runner } from '../runner.js';
import { parseOptions } from '../options.js';
import { printFittedTable, printJson, printTable, progressBar, type Output } from '../output.js';
import type { ForecastReport } from '@trace-ingest/store/forecast';

export function printCsv(out: Output, rows: readonly Record<string, unknown>[]): void {
  if (rows.length > 0) out.out(toCsv(rows));
}

/** The columns `usage --wide` prints as a table, named as in its CSV; by default the group, its cost and its spans. */
const WIDE_COLUMNS = [
  'group',
  'total_cost',
  'spans',
  'unpriced_spans',
  'input_tokens',
  'cached_input_tokens',
  'cache_write_input_tokens',
  'output_tokens',
  'reasoning_tokens',
  'input_cost',
  'cached_input_cost',
  'cache_write_input_cost',
  'output_cost',
  'reasoning_cost',
];

/** The forecast's lines under the table: where the month will end, how far off that was before, the org's budget. */
function forecastLines(f: ForecastReport): string[] {
  const o = f.org;
  const out =
    o === null
      ? [`projected ${f.month} month-end: not yet (no spend in the last 14 complete days)`]
      : [
          `projected ${f.month} month-end: ${o.projectedUsd} USD at a daily run rate of ${o.dailyRateUsd} USD`,
          o.errorPct === null
            ? '(no past month with spend to measure this projection against)'
            : `(on the last ${o.errorMonths} month(s), made on this day of the month, it was off by ${o.errorPct}% on average)`,
        ];
  if (f.budgetUsd !== null) {
    const when =
      parseDecimal(f.spentUsd) >= parseDecimal(f.budgetUsd)
        ? 'already reached'
        : o?.crossesOn == null
          ? 'not projected to be reached this month'
          : `projected to be reached on ${o.crossesOn}`;
    out.push(`budget ${f.budgetUsd} USD, ${f.spentUsd} spent: ${when}`);
  }
  return out;
}

/** A customer's projected month-end in the table: the TOTAL row shows the org's. */
function projectedOf(f: ForecastReport, group: string): string {
  if (group === 'TOTAL') return f.org?.projectedUsd ?? '';
  return f.customers[group]?.projectedUsd ?? '';
}

function rangeText(w: { from: number; to: number }): string {
  return `${utcDay(w.from)} to ${utcDay(w.to - 1)}`;
}

export function registerReports(program: Command, run: Runner): void {
  program
    .command('usage')
    .description('spans, tokens and exact cost per dimension for an org, grouped; works while the server runs')
    .addHelpText(
      'after',
      [
        '',
        'Spans count in the range by their start time (UTC); the quota counts them by the month they were received.',
        '',
        'Examples:',
        '  trace-ingest usage --org acme                          this month, by model, and where the month will end',
        '  trace-ingest usage --org acme --month 2026-10 --by customer --csv > october.csv',
        '  trace-ingest usage --org acme --from 2026-11-01 --to 2026-11-15 --by day',
        '',
        'Environment: DATA_DIR (the server it asks, or the store it opens), CLICKHOUSE_URL, DATABASE_URL, as the server.',
      ].join('\n'),
    )
    .requiredOption('--org <org>', 'org name or id')
    .option('--month <YYYY-MM>', 'a UTC calendar month (default: this month)')
    .option('--from <date>', 'start (YYYY-MM-DD UTC or ISO timestamp)')
    .option('--to <date>', 'end (a bare date includes that day)')
    .option('--by <group>', `one of ${Object.keys(GROUPS).join(', ')}`, 'model')
    .option('--customer <id>', 'only this customer')
    .option('--limit <n>', 'the n groups of the largest cost (the total still counts every group)', '1000')
    .option('--wide', 'every token and cost column (the default table shows the group, its cost and spans, within 100 columns)')
    .option('--json', 'print JSON')
    .option('--csv', 'print CSV')
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(
          z.object({
            org: z.string().min(1),
            month: z.string().optional(),
            from: z.string().optional(),
            to: z.string().optional(),
            by: z.enum(Object.keys(GROUPS) as [keyof typeof GROUPS]),
            customer: z.string().optional(),
            limit: z.coerce.number().int().min(1).max(100_000),
            wide: z.boolean().optional(),
            json: z.boolean().optional(),
            csv: z.boolean().optional(),
          }),
          raw,
        );
        if (o.json === true && o.csv === true) throw new UsageError('give --json or --csv, not both');
        const { rows, total, truncated, window, orgId } = await usageInWindow(ctx, o);
        // This month's: where it will end, the org's and each customer's (not for one customer's report, nor in CSV).
        const forecast = o.csv !== true && o.customer === undefined && isThisMonth(window) ? await usageForecast(ctx, orgId) : undefined;
        if (o.json === true) printJson(out, { rows, total, ...(forecast === undefined ? {} : { forecast }) });
        else if (o.csv === true) printCsv(out, [...rows, total].map(usageCsvRow));
        else {
          out.out(`${o.org} by ${o.by}, spans that started ${rangeText(window)} (UTC)`);
          if (rows.length === 0) {
            out.out(await whereSpansAre(ctx, orgId));
            return;
          }
          // The CSV's own column names (a subset: the per-unit costs only when some row has one).
          // Spans without the dimension (no model, no customer) are '(none)', as in the console.
          const projected = o.by === 'customer' && forecast !== undefined;
          const csv = [...rows, total].map((r): Record<string, string | number> => ({
            ...usageCsvRow(r),
            group: r.group === '' ? '(none)' : r.group,
            ...(projected ? { projected_usd: projectedOf(forecast, r.group) } : {}),
          }));
          const units = ['image_cost', 'web_search_cost', 'request_cost'].filter((c) => csv.some((r) => r[c] !== '0'));
          const extra = projected ? ['projected_usd'] : [];
          if (o.wide === true) printTable(out, csv, [...WIDE_COLUMNS, ...units, ...extra]);
          else printFittedTable(out, csv, ['group', 'total_cost', ...extra, 'spans', ...(total.unpricedSpans > 0 ? ['unpriced_spans'] : [])]);
          if (truncated) out.out(`the ${o.limit} ${o.by} groups of the largest cost; TOTAL counts them all (--limit shows more)`);
          for (const line of forecast === undefined ? [] : forecastLines(forecast)) out.out(line);
          if (o.wide !== true) out.out('tokens and cost per bucket: --wide (or --json, --csv)');
        }
      }),
    );
  program
    .command('sql <query>')
    .description('run a read-only query on the span store (writes are refused); works while the server runs')
    .option('--limit <n>', 'at most n rows (the rest is left out, and said so)', '10000')
    .option('--json', 'print JSON')
    .action((query: string, raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(z.object({ limit: z.coerce.number().int().min(1).max(1_000_000), json: z.boolean().optional() }), raw);
        const { rows, more } = await sql(ctx, query, o.limit);
        if (o.json === true) printJson(out, rows);
        else printTable(out, rows, Object.keys(rows[0] ?? {}));
        if (more) out.err(`only the first ${o.limit} rows are shown: add a LIMIT or an aggregate to the query, or raise --limit`);
      }),
    );
  program
    .command('export')
    .description(
      "write an org's spans of a window to a file (every column of the spans table), or its FOCUS chargeback rows, streamed; " + 'works while the server runs',
    )
    .requiredOption('--org <org>', 'org name or id')
    .option('--month <YYYY-MM>', 'a UTC calendar month (default: this month)')
    .option('--from <date>', 'start (YYYY-MM-DD UTC or ISO timestamp)')
    .option('--to <date>', 'end (a bare date includes that day)')
    .requiredOption('--format <format>', 'parquet, csv or ndjson (spans), or focus (FinOps FOCUS 1.2 charges: CSV or Parquet by --out)')
    .requiredOption('--out <file>', 'the file to write (replaced)')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  trace-ingest export --org acme --month 2026-10 --format parquet --out acme-2026-10.parquet\n' +
        '  trace-ingest export --org acme --month 2026-10 --format focus --out acme-2026-10-focus.csv',
    )
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(
          z.object({
            org: z.string().min(1),
            month: z.string().optional(),
            from: z.string().optional(),
            to: z.string().optional(),
            format: z.enum(['parquet', 'csv', 'ndjson', 'focus']),
            out: z.string().min(1),
            json: z.boolean().optional(),
          }),
          raw,
        );
        const bar = out.isTty === true ? progressBar(out) : undefined;
        const r = await exportSpans(ctx, o, bar);
        if (bar !== undefined) out.err('');
        if (o.json === true) printJson(out, { ...r, format: o.format });
        else out.out(`wrote ${r.rows} ${o.format === 'focus' ? 'FOCUS charge rows' : 'spans'} to ${r.file} (${r.bytes} bytes, ${o.format})`);
      }),
    );
  program
    .command('reprice')
    .description('recompute stored costs with the current prices (idempotent); reports rows changed and the cost difference')
    .requiredOption('--org <org>', 'org name or id')
    .requiredOption('--from <date>', 'start (YYYY-MM-DD UTC or ISO timestamp)')
    .option('--to <date>', 'end (default: now)')
    .option('--model <model>', 'only spans of this model')
    .option('--json', 'print JSON')
    .action((o: { org: string; from: string; to?: string; model?: string; json?: boolean }) =>
      run(
        async (ctx, out) => {
          const r = await repriceSpans(ctx, o);
          if (o.json === true) printJson(out, r);
          else
            out.out(
              `repriced ${r.rowsChanged} of ${r.rowsScanned} spans (${r.newlyPriced} newly priced): ` +
                `${r.costBefore} → ${r.costAfter} USD (difference ${r.costDifference})`,
            );
        },
        { duckdbMemoryLimit: REPRICE_DUCKDB_MEMORY },
      ),
    );
}
