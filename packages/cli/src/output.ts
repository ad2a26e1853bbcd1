import Table from 'cli-table3';

export interface Output {
  out(text: string): void;
  err(text: string): void;
}

export const stdio: Output = {
  out: (t) => process.stdout.write(t.endsWith('\n') ? t : t + '\n'),
  err: (t) => process.stderr.write(t.endsWith('\n') ? t : t + '\n'),
};

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

function formatCell(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number') return v.toLocaleString('en-US');
  return String(v);
}
