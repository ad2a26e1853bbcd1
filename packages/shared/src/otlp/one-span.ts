import type { OtlpExportRequest, OtlpKeyValue, OtlpSpan } from './types.js';

/**
 * A request of one well-formed span with these attributes (and whatever of
 * the span `extra` overrides): the smallest input the mapping takes, for
 * checks of one attribute or one field at a time.
 */
export function oneSpanRequest(attributes: OtlpKeyValue[], extra: Partial<OtlpSpan> = {}, resource: OtlpKeyValue[] = []): OtlpExportRequest {
  const t0 = 1_768_478_400_000;
  const span: OtlpSpan = {
    traceId: Buffer.from('0af7651916cd43dd8448eb211c80319c', 'hex'),
    spanId: Buffer.from('00f067aa0ba902b7', 'hex'),
    name: 'op',
    startTimeUnixNano: `${t0}000000`,
    endTimeUnixNano: `${t0 + 5}000000`,
    attributes,
    ...extra,
  };
  return { resourceSpans: [{ resource: { attributes: resource }, scopeSpans: [{ spans: [span] }] }] };
}
