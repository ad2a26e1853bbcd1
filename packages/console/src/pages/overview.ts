import { usageCsvRow } from '@trace-ingest/shared/csv';
import { parseDecimal, formatDecimal } from '@trace-ingest/shared/decimal';
import { getJson, type Overview, type UsageRow } from '../api.js';
import { budgetBar, stackedBars } from '../charts.js';
import { exactUsd, h, int, sharedDecimals, usd } from '../dom.js';
import { table } from '../table.js';
import type { Page } from './page.js';

export const overview: Page = async ({ org, from, to }) => {
  const d = await getJson<Overview>('overview', { org, from, to });
  const byDay = new Map<string, { cost: bigint; spans: number }>();
  for (const s of d.series) {
    const cur = byDay.get(s.day) ?? { cost: 0n, spans: 0 };
    byDay.set(s.day, { cost: cur.cost + parseDecimal(s.cost), spans: cur.spans + s.spans });
  }
  const cell = (model: string, day: string, pick: 'cost' | 'spans') => {
    const s = d.series.find((x) => x.model === model && x.day === day);
    return s === undefined ? (pick === 'cost' ? '0' : 0) : s[pick];
  };
  const mtd = d.monthToDate;
  const quotaBar =
    mtd.quotaUsed === null
      ? null
      : h(
          'div',
          { class: 'meter', role: 'meter', 'aria-valuenow': mtd.quotaUsed, 'aria-valuemin': 0, 'aria-valuemax': 100 },
          h('span', { style: `width:${Math.min(100, Number(mtd.quotaUsed))}%` }),
        );
  const costCanvas = h('canvas', { 'aria-label': 'cost per day, stacked by model' });
  const spanCanvas = h('canvas', { 'aria-label': 'spans per day, stacked by model' });
  const node = h(
    'div',
    { class: 'page', 'data-page': 'overview' },
    h(
      'div',
      { class: 'kpis' },
      kpi('Cost in range', usd(d.total.costs.total_cost ?? '0'), 'range-cost', exactUsd(d.total.costs.total_cost ?? '0')),
      kpi('Spans started in range', int(d.total.spans), 'range-spans'),
      kpi('Unpriced spans', int(d.total.unpricedSpans), 'range-unpriced'),
      forecastKpi(mtd.month, mtd.cost, d.forecast),
      d.budget === null
        ? null
        : h('div', { class: 'kpi', 'data-kpi': 'budget' }, h('div', { class: 'kpi-label' }, `Budget, ${mtd.month}`), budgetBar(d.budget)),
      h(
        'div',
        { class: 'kpi', 'data-kpi': 'quota' },
        h('div', { class: 'kpi-label' }, `Received this month (${mtd.month}), against the quota`),
        h('div', { class: 'kpi-value' }, `${int(mtd.spansCounted)} / ${mtd.quotaSpans === 0 ? '—' : int(mtd.quotaSpans)} spans`),
        quotaBar,
        h('div', { class: 'muted small' }, `${mtd.quotaUsed === null ? 'no quota' : `${mtd.quotaUsed}% used`} · cost ${usd(mtd.cost)} · plan ${d.org.plan}`),
        h(
          'div',
          { class: 'muted small', 'data-kpi-note': 'months' },
          'The quota counts spans by the month they were received; the range above, by their start time.',
        ),
      ),
    ),
    h('section', { class: 'card' }, h('h2', {}, 'Cost per day (USD), by model'), h('div', { class: 'chart' }, costCanvas)),
    h('section', { class: 'card' }, h('h2', {}, 'Spans per day, by model'), h('div', { class: 'chart' }, spanCanvas)),
    table<UsageRow>({
      name: 'overview-models',
      title: 'By model',
      rows: d.rows,
      total: d.total,
      rowKey: (r) => r.group,
      sort: { key: 'total_cost', desc: true },
      columns: [
        { key: 'group', label: 'Model', kind: 'text', value: (r) => r.group || '(none)', wrap: true },
        { key: 'total_cost', label: 'Cost', kind: 'money', value: (r) => r.costs.total_cost ?? '0', unpriced: (r) => r.unpricedSpans },
        { key: 'spans', label: 'Spans', kind: 'int', value: (r) => r.spans },
        { key: 'unpriced_spans', label: 'Unpriced', kind: 'int', value: (r) => r.unpricedSpans, minor: true },
        { key: 'input_tokens', label: 'Input tokens', kind: 'int', value: (r) => r.tokens.input_tokens ?? 0, minor: true },
        { key: 'output_tokens', label: 'Output tokens', kind: 'int', value: (r) => r.tokens.output_tokens ?? 0, minor: true },
      ],
      csv: { filename: `usage-by-model-${d.org.name}-${d.range.from}_${d.range.to}.csv`, records: () => [...d.rows, d.total].map(usageCsvRow) },
    }),
    table<{ day: string; spans: number; cost: string }>({
      name: 'overview-days',
      title: 'By day',
      rows: d.days.map((day) => ({ day, spans: byDay.get(day)?.spans ?? 0, cost: formatDecimal(byDay.get(day)?.cost ?? 0n) })),
      rowKey: (r) => r.day,
      sort: { key: 'day', desc: false },
      columns: [
        { key: 'day', label: 'Day (UTC)', kind: 'text', value: (r) => r.day },
        { key: 'spans', label: 'Spans', kind: 'int', value: (r) => r.spans },
        { key: 'cost', label: 'Cost', kind: 'money', value: (r) => r.cost },
      ],
      csv: {
        filename: `usage-by-day-model-${d.org.name}-${d.range.from}_${d.range.to}.csv`,
        records: () => d.series.map((s) => ({ day: s.day, model: s.model, spans: s.spans, total_cost: s.cost })),
      },
    }),
  );
  const charts = () => {
    const series = d.models.map((m) => ({
      label: m,
      exact: d.days.map((day) => String(cell(m, day, 'cost'))),
      values: d.days.map((day) => Number(cell(m, day, 'cost'))),
    }));
    const spans = d.models.map((m) => ({
      label: m,
      exact: d.days.map((day) => String(cell(m, day, 'spans'))),
      values: d.days.map((day) => Number(cell(m, day, 'spans'))),
    }));
    const a = stackedBars(costCanvas, d.days, series, usd);
    const b = stackedBars(spanCanvas, d.days, spans, (s) => `${int(Number(s))} spans`, true);
    return () => {
      a.destroy();
      b.destroy();
    };
  };
  return { node, mounted: charts };
};

/** Where this month will end: the projection, the daily run rate it uses, and how far off it was on past months. */
function forecastKpi(month: string, spent: string, f: Overview['forecast']): HTMLElement {
  if (f === null)
    return h(
      'div',
      { class: 'kpi', 'data-kpi': 'forecast' },
      h('div', { class: 'kpi-label' }, `Projected for ${month}`),
      h('div', { class: 'kpi-value muted' }, '—'),
      h('div', { class: 'muted small' }, 'no spend in the last 14 complete days'),
    );
  const d = sharedDecimals([spent, f.projectedUsd]);
  const error =
    f.errorPct === null || f.errorPct === undefined
      ? 'no past month to measure it on'
      : `±${f.errorPct}% on average over the last ${f.errorMonths ?? 0} month(s)`;
  return h(
    'div',
    { class: 'kpi', 'data-kpi': 'forecast' },
    h('div', { class: 'kpi-label' }, `Projected for ${month}`),
    h('div', { class: 'kpi-value', title: exactUsd(f.projectedUsd), 'data-value': f.projectedUsd }, usd(f.projectedUsd, d)),
    h('div', { class: 'muted small' }, `${usd(spent, d)} so far · ${usd(f.dailyRateUsd)} a day · ${error}`),
  );
}

function kpi(label: string, value: string, name: string, title?: string): HTMLElement {
  return h('div', { class: 'kpi', 'data-kpi': name }, h('div', { class: 'kpi-label' }, label), h('div', { class: 'kpi-value', title }, value));
}
