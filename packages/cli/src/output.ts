import Table from 'cli-table3';

export interface Output {
  out(text: string): void;
  err(text: string): void;
  /** Set when stderr is a terminal: progress may redraw a line there. */
  isTty?: boolean;
  /** Writes to stderr as is (no newline): a progress line redrawn with \r. */
  progress?(text: string): void;
}

export const stdio: Output = {
  out: (t) => process.stdout.write(t.endsWith('\n') ? t : t + '\n'),
  err: (t) => process.stderr.write(t.endsWith('\n') ? t : t + '\n'),
  isTty: process.stderr.isTTY,
  progress: (t) => process.stderr.write(t),
};

/** A progress bar on stderr, redrawn in place: [#####-----] 52% 520,000 / 1,000,000 rows (a count alone when the total is not known). */
export function progressBar(o: Output, width = 30): (done: number, total: number) => void {
  return (done, total) => {
    if (total === 0) {
      o.progress?.(`\r${done.toLocaleString('en-US')} rows`);
      return;
    }
    const share = total === 0 ? 1 : Math.min(1, done / total);
    const filled = Math.round(share * width);
    const counts = `${done.toLocaleString('en-US')} / ${total.toLocaleString('en-US')} rows`;
    o.progress?.(`\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${Math.round(share * 100)}% ${counts}`);
  };
}

export function printJson(o: Output, data: unknown): void {
  o.out(JSON.stringify(data, null, 2));
}

/** A table of the given columns; '' for null/undefined. */
export function printTable<T extends object>(o: Output, rows: readonly T[], columns: readonly (keyof T & string)[]): void {
  if (rows.length === 0) {
    o.out('(none)');
    return;
  }
  const t = new Table({ head: [...columns], style: { head: [], border: [] } });
  for (const r of rows) t.push(columns.map((c) => formatCell(r[c])));
  o.out(t.toString());
}

/**
 * A table at most `width` characters wide: each column but the first as wide
 * as its widest cell, the first (the group) given what is left and wrapped
 * inside it when longer.
 */
export function printFittedTable<T extends object>(o: Output, rows: readonly T[], columns: readonly (keyof T & string)[], width = 100): void {
  if (rows.length === 0) {
    o.out('(none)');
    return;
  }
  const cells = rows.map((r) => columns.map((c) => formatCell(r[c])));
  // Each column's content plus one space either side; the borders take one character per column and one more.
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => (r[i] ?? '').length)) + 2);
  const rest = widths.slice(1).reduce((a, b) => a + b, 0) + columns.length + 1;
  widths[0] = Math.max(12, Math.min(widths[0] ?? 12, width - rest));
  const t = new Table({ head: [...columns], colWidths: widths, wordWrap: true, wrapOnWordBoundary: false, style: { head: [], border: [] } });
  for (const r of cells) t.push(r);
  o.out(t.toString());
}

function formatCell(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number') return v.toLocaleString('en-US');
  return String(v);
}
