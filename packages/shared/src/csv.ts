/**
 * CSV as the CLI prints it and the console downloads it (RFC 4180 quoting,
 * columns from the first row), so an export from either matches the other.
 *
 * Every cell is safe to open in a spreadsheet: text that starts with `=`,
 * `+`, `-`, `@`, a tab or a carriage return (OWASP's CSV injection rule) gets
 * a leading `'`, so a customer id such as `=HYPERLINK(...)` sent by any
 * ingest key is shown as text, never run as a formula. A number, and text
 * that is a plain decimal number (`-0.5`, exact costs), is left as it is.
 * JSON, NDJSON and Parquet keep the exact value.
 */

const FORMULA_START = /^[=+\-@\t\r]/;
const PLAIN_NUMBER = /^[-+]?\d+(\.\d+)?([eE][-+]?\d+)?$/;

/** The text of a cell a spreadsheet shows as text: OWASP's leading quote where it could start a formula. */
export function neutralizeFormula(s: string): string {
  return FORMULA_START.test(s) && !PLAIN_NUMBER.test(s) ? `'${s}` : s;
}

export function csvCell(v: unknown): string {
  const raw = v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v as string | number | boolean);
  const s = typeof v === 'number' || typeof v === 'bigint' ? raw : neutralizeFormula(raw);
  return /[",\n\r]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** Header line from the first row's keys, then one line per row; '' when there are no rows. */
export function toCsv(rows: readonly Record<string, unknown>[]): string {
  const first = rows[0];
  if (first === undefined) return '';
  const cols = Object.keys(first);
  return [cols.map(csvCell).join(','), ...rows.map((r) => cols.map((c) => csvCell(r[c])).join(','))].join('\n');
}

/** A usage report row (store/reports UsageRow) as one flat CSV record: group, spans, unpriced_spans, tokens…, costs…. */
export function usageCsvRow(r: {
  group: string;
  spans: number;
  unpricedSpans: number;
  tokens: Record<string, number>;
  costs: Record<string, string>;
}): Record<string, string | number> {
  return { group: r.group, spans: r.spans, unpriced_spans: r.unpricedSpans, ...r.tokens, ...r.costs };
}
