import { isUnpriced } from '@trace-ingest/shared/unpriced';
import { getJson, type Trace, type TraceSpan, type Traces, type UsageRow } from '../api.js';
import { exactUsd, h, int, sharedDecimals, usd } from '../dom.js';
import { table } from '../table.js';
import type { Page } from './page.js';

/** The most expensive traces of the range; each opens as a waterfall. */
export const traces: Page = async ({ org, from, to }) => {
  const d = await getJson<Traces>('traces', { org, from, to });
  const link = (id: string) => h('a', { href: `#/trace/${encodeURIComponent(id)}?org=${encodeURIComponent(org)}&from=${from}&to=${to}` }, id);
  const node = h(
    'div',
    { class: 'page', 'data-page': 'traces' },
    table<UsageRow>({
      name: 'traces',
      title: d.count > d.rows.length ? `Most expensive ${d.rows.length} of ${int(d.count)} traces` : `Traces (${d.count})`,
      rows: d.rows,
      rowKey: (r) => r.group,
      sort: { key: 'total_cost', desc: true },
      columns: [
        { key: 'trace_id', label: 'Trace', kind: 'node', value: (r) => r.group, cell: (r) => link(r.group), wrap: true },
        // Second, so it stays on screen on a phone.
        { key: 'total_cost', label: 'Cost', kind: 'money', value: (r) => r.costs.total_cost ?? '0', unpriced: (r) => r.unpricedSpans },
        { key: 'trace_name', label: 'Name', kind: 'text', value: (r) => d.labels[r.group]?.name || '(none)', wrap: true },
        { key: 'customer', label: 'Customer', kind: 'text', value: (r) => d.labels[r.group]?.customer || '(none)', wrap: true },
        { key: 'spans', label: 'Spans', kind: 'int', value: (r) => r.spans },
        { key: 'input_tokens', label: 'Input tokens', kind: 'int', value: (r) => r.tokens.input_tokens ?? 0, minor: true },
        { key: 'output_tokens', label: 'Output tokens', kind: 'int', value: (r) => r.tokens.output_tokens ?? 0, minor: true },
      ],
      csv: {
        filename: `traces-${d.org.name}-${d.range.from}_${d.range.to}.csv`,
        records: () =>
          d.rows.map((r) => ({
            trace_id: r.group,
            trace_name: d.labels[r.group]?.name ?? '',
            customer_id: d.labels[r.group]?.customer ?? '',
            spans: r.spans,
            input_tokens: r.tokens.input_tokens ?? 0,
            output_tokens: r.tokens.output_tokens ?? 0,
            total_cost: r.costs.total_cost ?? '0',
          })),
      },
    }),
  );
  return { node };
};

/** One trace: a waterfall of its spans, each bar placed by start and length, with its cost. */
/** A span's audio tokens as `in (cached) / out`, '' when it had none. */
function audio(s: TraceSpan): string {
  if (s.audioInputTokens + s.cachedAudioInputTokens + s.audioOutputTokens === 0) return '';
  return `${s.audioInputTokens}${s.cachedAudioInputTokens === 0 ? '' : ` (+${s.cachedAudioInputTokens} cached)`} / ${s.audioOutputTokens}`;
}

export const trace: Page = async ({ org, arg }) => {
  const d = await getJson<Trace>(`traces/${encodeURIComponent(arg ?? '')}`, { org });
  const span = Math.max(1, d.durationMs);
  const depth = depths(d.spans);
  const costDecimals = sharedDecimals([...d.spans.map((s) => s.cost), d.totalCost]);
  const bars = h(
    'ol',
    { class: 'waterfall', 'data-waterfall': d.traceId },
    ...d.spans.map((s) =>
      h(
        'li',
        { 'data-span': s.spanId },
        h(
          'div',
          { class: 'wf-label', style: `padding-left:${Math.min(6, depth.get(s.spanId) ?? 0) * 0.8}rem`, title: `${s.spanType} · ${s.model || 'no model'}` },
          h('span', { class: `tag ${s.spanType}` }, s.spanType),
          ' ',
          s.name,
        ),
        h(
          'div',
          { class: 'wf-track' },
          h('span', {
            class: `wf-bar${s.status === 'error' ? ' err' : ''}`,
            style: `left:${(100 * s.offsetMs) / span}%;width:${Math.max(0.5, (100 * s.durationMs) / span)}%`,
          }),
        ),
        h('div', { class: 'wf-cost num', 'data-col': 'cost' }, s.priced || s.cost !== '0' ? usd(s.cost, costDecimals) : s.model === '' ? '—' : 'unpriced'),
      ),
    ),
  );
  // Spans with a model but no price count as $0: say how many, beside the total.
  const unpricedSpans = d.spans.filter((s) => isUnpriced(s.priced, s.model)).length;
  const node = h(
    'div',
    { class: 'page', 'data-page': 'trace' },
    h(
      'section',
      { class: 'card' },
      h('header', { class: 'card-head' }, h('h2', {}, `Trace ${d.traceId}`), h('a', { href: `#/traces?org=${encodeURIComponent(org)}` }, '← all traces')),
      h(
        'p',
        { class: 'muted small' },
        `${d.traceName || 'unnamed'} · customer ${d.customerId || '—'} · started ${d.start} · ${int(d.durationMs)} ms · ${d.spans.length} spans · `,
        h('strong', { 'data-trace-total': '', title: exactUsd(d.totalCost) }, usd(d.totalCost, costDecimals)),
        unpricedSpans > 0 ? h('span', { class: 'unpriced', 'data-unpriced': unpricedSpans }, `${int(unpricedSpans)} unpriced`) : null,
      ),
      bars,
    ),
    table<TraceSpan>({
      name: 'trace-spans',
      title: 'Spans',
      rows: d.spans,
      rowKey: (s) => s.spanId,
      sort: { key: 'offset_ms', desc: false },
      columns: [
        { key: 'name', label: 'Span', kind: 'text', value: (s) => s.name, wrap: true },
        { key: 'span_type', label: 'Type', kind: 'text', value: (s) => s.spanType, minor: true },
        { key: 'model', label: 'Model', kind: 'text', value: (s) => s.model || '(none)', wrap: true },
        { key: 'service_tier', label: 'Tier', kind: 'text', value: (s) => [s.serviceTier, s.region].filter((x) => x !== '').join(' / '), minor: true },
        { key: 'offset_ms', label: 'Start +ms', kind: 'int', value: (s) => s.offsetMs, minor: true },
        { key: 'duration_ms', label: 'ms', kind: 'int', value: (s) => s.durationMs },
        // Every priced bucket, so the tokens shown account for the span's cost.
        { key: 'input_tokens', label: 'In tokens', kind: 'int', value: (s) => s.inputTokens, minor: true },
        { key: 'cached_input_tokens', label: 'Cached', kind: 'int', value: (s) => s.cachedInputTokens, minor: true },
        { key: 'cache_write_input_tokens', label: 'Cache write', kind: 'int', value: (s) => s.cacheWriteInputTokens, minor: true },
        { key: 'output_tokens', label: 'Out tokens', kind: 'int', value: (s) => s.outputTokens, minor: true },
        { key: 'reasoning_tokens', label: 'Reasoning', kind: 'int', value: (s) => s.reasoningTokens, minor: true },
        { key: 'cache_write_1h_input_tokens', label: 'Cache write 1h', kind: 'int', value: (s) => s.cacheWrite1hInputTokens, minor: true },
        { key: 'audio_tokens', label: 'Audio in/out', kind: 'text', value: (s) => audio(s), minor: true },
        { key: 'cost', label: 'Cost', kind: 'money', value: (s) => s.cost, unpriced: (s) => (isUnpriced(s.priced, s.model) ? 1 : 0) },
      ],
      csv: {
        filename: `trace-${d.traceId}.csv`,
        records: () =>
          d.spans.map((s) => ({
            span_id: s.spanId,
            parent_span_id: s.parentSpanId,
            name: s.name,
            span_type: s.spanType,
            provider: s.provider,
            model: s.model,
            offset_ms: s.offsetMs,
            duration_ms: s.durationMs,
            input_tokens: s.inputTokens,
            cached_input_tokens: s.cachedInputTokens,
            cache_write_input_tokens: s.cacheWriteInputTokens,
            output_tokens: s.outputTokens,
            reasoning_tokens: s.reasoningTokens,
            service_tier: s.serviceTier,
            region: s.region,
            cache_write_1h_input_tokens: s.cacheWrite1hInputTokens,
            audio_input_tokens: s.audioInputTokens,
            cached_audio_input_tokens: s.cachedAudioInputTokens,
            audio_output_tokens: s.audioOutputTokens,
            total_cost: s.cost,
            price_source: s.priceSource,
          })),
      },
    }),
  );
  return { node };
};

function depths(spans: TraceSpan[]): Map<string, number> {
  const parent = new Map(spans.map((s) => [s.spanId, s.parentSpanId]));
  const out = new Map<string, number>();
  for (const s of spans) {
    let n = 0;
    for (let p = parent.get(s.spanId); p !== undefined && p !== '' && n < 32; p = parent.get(p)) n++;
    out.set(s.spanId, n);
  }
  return out;
}
