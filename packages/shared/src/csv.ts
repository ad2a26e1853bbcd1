/**
 * CSV as the CLI prints it and the console downloads it (RFC 4180 quoting,
 * columns from the first row), so an export from either matches the other.
 */

export function csvCell(v: unknown): string {
  const s = v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v as string | number | boolean);
  return /[",\n\r]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** Header line from the first row's keys, then one line per row; '' when there are no rows. */
export function toCsv(rows: readonly Record<string, unknown>[]): string {
  const first = rows[0];
  if (first === undefined) return '';
  const cols = Object.keys(first);
  return [cols.join(','), ...rows.map((r) => cols.map((c) => csvCell(r[c])).join(','))].join('\n');
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
