import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip } from 'chart.js';
import { parseDecimal } from '@trace-ingest/shared/decimal';
import type { BudgetStatus } from './api.js';
import { h, sharedDecimals, svg, usd } from './dom.js';

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Tooltip, Legend);

const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
export const color = (i: number): string => PALETTE[i % PALETTE.length] ?? '#888';

export interface StackedSeries {
  label: string;
  /** Plotted heights (the chart needs numbers)… */
  values: number[];
  /** …while tooltips show the exact figures. */
  exact: string[];
}

/** Bars per day stacked by model. */
export function stackedBars(
  canvas: HTMLCanvasElement,
  labels: string[],
  series: StackedSeries[],
  unit: (exact: string) => string,
  counts = false,
): Chart<'bar'> {
  return new Chart(canvas, {
    type: 'bar',
    data: {
      labels: labels.map((d) => d.slice(5)),
      datasets: series.map((s, i) => ({ label: s.label || '(none)', data: s.values, backgroundColor: color(i), borderWidth: 0, maxBarThickness: 36 })),
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      interaction: { mode: 'index', intersect: false },
      scales: { x: { stacked: true, grid: { display: false } }, y: { stacked: true, beginAtZero: true, ...(counts ? { ticks: { precision: 0 } } : {}) } },
      plugins: {
        legend: { position: 'bottom', labels: { boxWidth: 12 } },
        tooltip: {
          callbacks: {
            title: (items) => labels[items[0]?.dataIndex ?? 0] ?? '',
            label: (item) => `${item.dataset.label ?? ''}: ${unit(series[item.datasetIndex]?.exact[item.dataIndex] ?? '0')}`,
          },
        },
      },
    },
  });
}

/** A per-day sparkline of exact values; heights only need to be proportional. */
export function sparkline(values: string[], width = 120, height = 28): SVGSVGElement {
  const nums = values.map(Number);
  const max = Math.max(...nums, 0);
  const step = nums.length > 1 ? width / (nums.length - 1) : 0;
  const pts = nums.map((v, i) => `${(i * step).toFixed(1)},${(height - 2 - (max === 0 ? 0 : (v / max) * (height - 4))).toFixed(1)}`).join(' ');
  const el = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, height, class: 'spark', role: 'img', 'aria-label': `cost per day, peak ${max}` });
  el.append(svg('polyline', { points: pts, fill: 'none', stroke: color(0), 'stroke-width': 1.5, 'vector-effect': 'non-scaling-stroke' }));
  return el;
}

/**
 * Spent against a budget: a bar filled to the share spent (capped at the
 * end, red once past it), a tick where the month is projected to end, and
 * both exact figures in the title.
 */
export function budgetBar(b: BudgetStatus): HTMLElement {
  const spent = parseDecimal(b.spentUsd);
  const budget = parseDecimal(b.budgetUsd ?? '0');
  const share = (v: bigint) => (budget === 0n ? 0 : Number((v * 10_000n) / budget) / 100);
  const percent = share(spent);
  const f = b.forecast;
  const projected = f === null ? undefined : share(parseDecimal(f.projectedUsd));
  const d = sharedDecimals([b.spentUsd, b.budgetUsd ?? '0', ...(f === null ? [] : [f.projectedUsd])]);
  return h(
    'div',
    {
      class: `budget${percent >= 100 ? ' over' : projected !== undefined && projected > 100 ? ' heading-over' : ''}`,
      'data-budget': `${b.spentUsd}/${b.budgetUsd ?? ''}`,
      ...(f === null ? {} : { 'data-projected': f.projectedUsd }),
      title: `$${b.spentUsd} of $${b.budgetUsd ?? ''} this month${f === null ? '' : `, $${f.projectedUsd} projected at its end`} (exact)`,
    },
    h(
      'div',
      { class: 'meter', role: 'meter', 'aria-valuenow': percent, 'aria-valuemin': 0, 'aria-valuemax': 100 },
      h('span', { style: `width:${Math.min(100, percent)}%` }),
      projected === undefined ? null : h('i', { class: 'projected', style: `left:${Math.min(100, projected)}%`, 'aria-hidden': 'true' }),
    ),
    h('div', { class: 'muted small' }, `${usd(b.spentUsd, d)} of ${usd(b.budgetUsd ?? '0', d)} this month (${percent.toFixed(0)}%)`),
    f === null
      ? null
      : h(
          'div',
          { class: 'muted small', 'data-budget-forecast': '' },
          `projected ${usd(f.projectedUsd, d)}${f.crossesOn === null ? '' : `, over on ${f.crossesOn}`}`,
        ),
  );
}
