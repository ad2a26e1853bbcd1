import { toCsv } from '@trace-ingest/shared/csv';
import { parseDecimal } from '@trace-ingest/shared/decimal';
import { download, exactUsd, h, int, sharedDecimals, usd } from './dom.js';

export interface Column<R> {
  key: string;
  label: string;
  kind: 'text' | 'int' | 'money' | 'node';
  value: (r: R) => string | number;
  /** A custom cell (sparklines, links); sorting still uses `value`. */
  cell?: (r: R) => Node;
  /** Hidden on narrow screens (never a money figure, a budget or a customer). */
  minor?: boolean;
  /** Text that may wrap anywhere (ids, commands, sources): a long one does not widen the table. */
  wrap?: boolean;
  /** For a money column: spans of the row with no price, shown beside the cost (never a bare $0). */
  unpriced?: (r: R) => number;
}

export interface TableSpec<R> {
  name: string;
  title: string;
  columns: Column<R>[];
  rows: R[];
  rowKey: (r: R) => string;
  total?: R;
  /** The CSV download: file name and records (exact values, as the CLI prints them). */
  csv: { filename: string; records: () => Record<string, unknown>[] };
  sort?: { key: string; desc: boolean };
  empty?: string;
}

function compare(kind: Column<unknown>['kind'], a: string | number, b: string | number): number {
  if (kind === 'money') {
    // A money cell without a figure ('') sorts below every amount.
    if (a === '' || b === '') return a === b ? 0 : a === '' ? -1 : 1;
    const d = parseDecimal(String(a)) - parseDecimal(String(b));
    return d > 0n ? 1 : d < 0n ? -1 : 0;
  }
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b));
}

/**
 * A sortable table (click a heading) with a CSV button; the total row stays
 * last. Each money column shows its figures at one precision. On a phone the
 * rows become stacked cards, each cell labelled (`data-label`), so no column
 * needs sideways scrolling.
 */
export function table<R>(spec: TableSpec<R>): HTMLElement {
  let sort = spec.sort;
  const all = spec.total === undefined || spec.rows.length === 0 ? spec.rows : [...spec.rows, spec.total];
  const decimals = new Map(
    spec.columns.filter((c) => c.kind === 'money').map((c) => [c.key, sharedDecimals(all.map((r) => String(c.value(r))).filter((v) => v !== ''))]),
  );
  const tbody = h('tbody');
  const headRow = h('tr');
  const render = () => {
    const rows = [...spec.rows];
    const col = spec.columns.find((c) => c.key === sort?.key);
    if (col !== undefined && sort !== undefined) {
      const dir = sort.desc ? -1 : 1;
      rows.sort((a, b) => dir * compare(col.kind, col.value(a), col.value(b)));
    }
    tbody.replaceChildren(...rows.map((r) => row(r, false)), ...(spec.total === undefined || spec.rows.length === 0 ? [] : [row(spec.total, true)]));
    for (const th of headRow.children)
      th.setAttribute('aria-sort', th.getAttribute('data-col') === sort?.key ? (sort.desc ? 'descending' : 'ascending') : 'none');
  };
  const row = (r: R, isTotal: boolean) =>
    h(
      'tr',
      { 'data-key': isTotal ? 'TOTAL' : spec.rowKey(r), class: isTotal ? 'total' : undefined },
      ...spec.columns.map((c) => {
        const v = c.value(r);
        const content =
          c.cell !== undefined
            ? isTotal
              ? ''
              : c.cell(r)
            : c.kind === 'money'
              ? v === ''
                ? '—'
                : usd(String(v), decimals.get(c.key))
              : c.kind === 'int' && typeof v === 'number'
                ? int(v)
                : String(v);
        const unpriced = c.unpriced?.(r) ?? 0;
        return h(
          'td',
          {
            'data-col': c.key,
            'data-label': c.label,
            'data-value': String(v),
            title: c.kind === 'money' && v !== '' ? exactUsd(String(v)) : undefined,
            class:
              [
                c.kind === 'text' || c.kind === 'node' ? '' : 'num',
                c.kind === 'money' ? 'money' : '',
                c.minor === true ? 'minor' : '',
                c.wrap === true ? 'wrap' : '',
              ]
                .filter((x) => x !== '')
                .join(' ') || undefined,
          },
          content,
          unpriced > 0
            ? h(
                'span',
                { class: 'unpriced', 'data-unpriced': unpriced, title: `${unpriced} span(s) without a price are counted as $0` },
                `${int(unpriced)} unpriced`,
              )
            : null,
        );
      }),
    );
  for (const c of spec.columns) {
    const th = h('th', {
      'data-col': c.key,
      scope: 'col',
      class: [c.kind === 'text' || c.kind === 'node' ? '' : 'num', c.minor === true ? 'minor' : ''].join(' ').trim() || undefined,
    });
    const btn = h(
      'button',
      {
        type: 'button',
        onclick: () => {
          sort = { key: c.key, desc: sort?.key === c.key ? !sort.desc : c.kind !== 'text' };
          render();
        },
      },
      c.label,
    );
    th.append(btn);
    headRow.append(th);
  }
  render();
  const exportBtn = h(
    'button',
    { type: 'button', class: 'csv', 'data-csv': spec.name, onclick: () => download(spec.csv.filename, toCsv(spec.csv.records())) },
    'Export CSV',
  );
  return h(
    'section',
    { class: 'card', 'data-table': spec.name },
    h('header', { class: 'card-head' }, h('h2', {}, spec.title), exportBtn),
    spec.rows.length === 0
      ? h('p', { class: 'muted' }, spec.empty ?? 'No spans in this range.')
      : h(
          'div',
          { class: 'scroll' },
          // A table of a few columns fits a phone as it is; a wider one becomes stacked cards there.
          h('table', { class: spec.columns.filter((c) => c.minor !== true).length > 3 ? 'stack' : undefined }, h('thead', {}, headRow), tbody),
        ),
  );
}
