import { getJson, type Models } from '../api.js';
import { h } from '../dom.js';
import { table } from '../table.js';
import type { Page } from './page.js';

type ModelRow = Models['rows'][number];

export const models: Page = async ({ org, from, to }) => {
  const d = await getJson<Models>('models', { org, from, to });
  // The second catalog's word where it disagrees: checked before trusting a cost.
  const secondCatalog = (r: ModelRow) =>
    r.secondCatalog === null || r.secondCatalog === undefined
      ? ''
      : `⚠ ${r.secondCatalog.catalog}: ` +
        r.secondCatalog.diffs
          .map((d) => `${d.variant === undefined ? '' : `${d.variant} `}${d.bucket}${d.tier === 'base' ? '' : ` ${d.tier}`} ${d.second}`)
          .join(', ');
  const source = (r: ModelRow) => (r.price === null ? (r.group === '' ? 'no model' : 'unpriced') : r.price.source);
  const node = h(
    'div',
    { class: 'page', 'data-page': 'models' },
    table<ModelRow>({
      name: 'models',
      title: 'Cost per model and provider',
      rows: d.rows,
      total: { ...d.total, price: null, secondCatalog: null },
      rowKey: (r) => `${r.group}|${r.subgroup ?? ''}`,
      sort: { key: 'total_cost', desc: true },
      columns: [
        { key: 'model', label: 'Model', kind: 'text', value: (r) => r.group || '(none)', wrap: true },
        { key: 'total_cost', label: 'Cost', kind: 'money', value: (r) => r.costs.total_cost ?? '0', unpriced: (r) => r.unpricedSpans },
        { key: 'provider', label: 'Provider', kind: 'text', value: (r) => r.subgroup ?? '', minor: true },
        { key: 'spans', label: 'Spans', kind: 'int', value: (r) => r.spans },
        { key: 'unpriced_spans', label: 'Unpriced', kind: 'int', value: (r) => r.unpricedSpans, minor: true },
        // Unit prices are money too: one precision per column, the catalog's exact figure in the title and data-value.
        { key: 'input_per_mtok', label: 'Input $/1M', kind: 'money', value: (r) => r.price?.inputPerMtok ?? '' },
        { key: 'output_per_mtok', label: 'Output $/1M', kind: 'money', value: (r) => r.price?.outputPerMtok ?? '' },
        { key: 'cached_input_per_mtok', label: 'Cached $/1M', kind: 'money', value: (r) => r.price?.cachedInputPerMtok ?? '' },
        {
          key: 'price_source',
          label: 'Price source',
          kind: 'text',
          value: (r) => (r.group === 'TOTAL' && r.price === null ? '' : source(r)),
          wrap: true,
        },
        { key: 'second_catalog', label: 'Second catalog', kind: 'text', value: (r) => secondCatalog(r), wrap: true },
      ],
      csv: {
        filename: `cost-by-model-${d.org.name}-${d.range.from}_${d.range.to}.csv`,
        records: () =>
          d.rows.map((r) => ({
            model: r.group,
            provider: r.subgroup ?? '',
            spans: r.spans,
            unpriced_spans: r.unpricedSpans,
            input_tokens: r.tokens.input_tokens ?? 0,
            output_tokens: r.tokens.output_tokens ?? 0,
            total_cost: r.costs.total_cost ?? '0',
            input_per_mtok: r.price?.inputPerMtok ?? '',
            output_per_mtok: r.price?.outputPerMtok ?? '',
            cached_input_per_mtok: r.price?.cachedInputPerMtok ?? '',
            cache_write_input_per_mtok: r.price?.cacheWriteInputPerMtok ?? '',
            reasoning_per_mtok: r.price?.reasoningPerMtok ?? '',
            price_source: source(r),
            second_catalog: secondCatalog(r),
          })),
      },
    }),
    table<Models['unpriced'][number]>({
      name: 'unpriced',
      title: 'Unpriced models',
      rows: d.unpriced,
      rowKey: (r) => `${r.model}|${r.provider}`,
      sort: { key: 'spans', desc: true },
      empty: 'Every span with a model in this range has a price.',
      columns: [
        { key: 'model', label: 'Model', kind: 'text', value: (r) => r.model, wrap: true },
        { key: 'provider', label: 'Provider', kind: 'text', value: (r) => r.provider },
        { key: 'spans', label: 'Spans', kind: 'int', value: (r) => r.spans },
        {
          key: 'fix',
          label: 'To price it, then recompute stored costs',
          kind: 'node',
          value: (r) => r.fix,
          cell: (r) => h('div', { class: 'fix' }, commandLine(r.fix), commandLine(r.reprice)),
        },
      ],
      csv: {
        filename: `unpriced-models-${d.org.name}-${d.range.from}_${d.range.to}.csv`,
        records: () => d.unpriced.map((u) => ({ model: u.model, provider: u.provider, spans: u.spans, fix: u.fix, reprice: u.reprice })),
      },
    }),
    h(
      'p',
      { class: 'muted small' },
      `Unit prices in force at ${d.pricesAt}: "catalog:…" is the bundled price catalog, "override:…" a price set with trace-ingest prices set.`,
    ),
  );
  return { node };
};

/** A command line that breaks between its words only (a word longer than the line is broken inside itself). */
function commandLine(line: string): HTMLElement {
  const words = line.split(' ');
  return h('code', {}, ...words.flatMap((w, i) => [...(i === 0 ? [] : [' ']), h('span', { class: 'word' }, w)]));
}
