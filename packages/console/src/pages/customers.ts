import { usageCsvRow } from '@trace-ingest/shared/csv';
import { getJson, type Customers, type UsageRow } from '../api.js';
import { budgetBar, sparkline } from '../charts.js';
import { h } from '../dom.js';
import { table } from '../table.js';
import type { Page } from './page.js';

export const customers: Page = async ({ org, from, to }) => {
  const d = await getJson<Customers>('customers', { org, from, to });
  const node = h(
    'div',
    { class: 'page', 'data-page': 'customers' },
    table<UsageRow>({
      name: 'customers',
      title: `Customers (${d.rows.length})`,
      rows: d.rows,
      total: d.total,
      rowKey: (r) => r.group,
      sort: { key: 'total_cost', desc: true },
      columns: [
        { key: 'group', label: 'Customer', kind: 'text', value: (r) => r.group || '(none)', wrap: true },
        { key: 'customer_name', label: 'Name', kind: 'text', value: (r) => d.names[r.group] ?? '', wrap: true },
        { key: 'total_cost', label: 'Cost', kind: 'money', value: (r) => r.costs.total_cost ?? '0', unpriced: (r) => r.unpricedSpans },
        { key: 'spans', label: 'Spans', kind: 'int', value: (r) => r.spans },
        { key: 'input_tokens', label: 'Input tokens', kind: 'int', value: (r) => r.tokens.input_tokens ?? 0, minor: true },
        { key: 'cached_input_tokens', label: 'Cached', kind: 'int', value: (r) => r.tokens.cached_input_tokens ?? 0, minor: true },
        { key: 'output_tokens', label: 'Output tokens', kind: 'int', value: (r) => r.tokens.output_tokens ?? 0, minor: true },
        { key: 'reasoning_tokens', label: 'Reasoning', kind: 'int', value: (r) => r.tokens.reasoning_tokens ?? 0, minor: true },
        { key: 'trend', label: 'Per day', kind: 'node', value: (r) => r.costs.total_cost ?? '0', cell: (r) => sparkline(d.daily[r.group] ?? []) },
        ...(Object.keys(d.forecasts).length === 0
          ? []
          : [
              {
                key: 'projected',
                label: 'Projected this month',
                kind: 'money' as const,
                // The TOTAL row has no projection of its own here: the overview shows the org's.
                value: (r: UsageRow) => (r.group === 'TOTAL' && r === d.total ? '' : (d.forecasts[r.group]?.projectedUsd ?? '')),
              },
            ]),
        ...(Object.keys(d.budgets).length === 0
          ? []
          : [
              {
                key: 'budget',
                label: 'Budget this month',
                kind: 'node' as const,
                value: (r: UsageRow) => d.budgets[r.group]?.spentUsd ?? '',
                cell: (r: UsageRow) => {
                  const b = d.budgets[r.group];
                  return b === undefined ? h('span', { class: 'muted' }, '—') : budgetBar(b);
                },
              },
            ]),
      ],
      csv: { filename: `usage-by-customer-${d.org.name}-${d.range.from}_${d.range.to}.csv`, records: () => [...d.rows, d.total].map(usageCsvRow) },
    }),
  );
  return { node };
};
