import fs from 'node:fs';
import path from 'node:path';
import type { Attributes, AttributeValue, HrTime, SpanKind } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-node';

/** The golden OTLP documents and the rows they must leave, and the same spans as the OpenTelemetry SDK holds them. */

export const OTLP_FIXTURES = path.resolve(import.meta.dirname, '../../fixtures/otlp');
const FAMILIES = path.resolve(import.meta.dirname, '../../../packages/shared/src/otlp/conventions');

export interface UsageFixture {
  description: string;
  request: OtlpDocument;
  expect: { rows: Record<string, unknown>[] };
}

export function loadFixtures<T>(dir: string, suffix = '.json'): [string, T][] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(suffix))
    .sort()
    .map((f) => [f.slice(0, -suffix.length), JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as T]);
}

/** One golden document beside each instrumentation family's module, then the cases that cut across families. */
export function usageFixtures(): [string, UsageFixture][] {
  return [...familyFixtures(), ...loadFixtures<UsageFixture>(path.join(OTLP_FIXTURES, 'usage'))];
}

export function familyFixtures(): [string, UsageFixture][] {
  return loadFixtures<UsageFixture>(FAMILIES, '.golden.json');
}

/** Store values as the fixtures write them: BIGINTs as numbers, decimals with their 18 digits, lists as arrays. */
export function normalize(v: unknown): unknown {
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v)) return v.map((x) => (typeof x === 'bigint' ? Number(x) : x));
  if (v !== null && typeof v === 'object' && 'toString' in v) return String(v);
  if (typeof v === 'string' && /^-?\d+$/.test(v) && v.length > 0 && v.length < 16) return Number(v);
  return v;
}

/** The rows a fixture expects, each found among `rows` by its span id, with the fixture's columns only. */
export function expectedRowsOf(fx: UsageFixture, rows: Record<string, unknown>[]): { got: Record<string, unknown>[]; want: Record<string, unknown>[] } {
  const got = fx.expect.rows.map((want) => {
    const row = rows.find((r) => r.span_id === want.span_id);
    const shown: Record<string, unknown> = {};
    for (const k of Object.keys(want)) shown[k] = normalize(row?.[k]);
    return shown;
  });
  return { got, want: fx.expect.rows };
}

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}
interface KeyValue {
  key: string;
  value: AnyValue;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: KeyValue[];
  events?: { name: string; timeUnixNano: string; attributes?: KeyValue[] }[];
  status?: { code?: number; message?: string };
}
export interface OtlpDocument {
  resourceSpans?: { resource?: { attributes?: KeyValue[] }; scopeSpans?: { scope?: { name?: string; version?: string }; spans?: OtlpSpan[] }[] }[];
}

function value(v: AnyValue): AttributeValue {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map((x) => value(x)) as AttributeValue;
  throw new Error(`an attribute value the SDK cannot hold: ${JSON.stringify(v)}`);
}

function attributes(kvs: KeyValue[] | undefined): Attributes {
  return Object.fromEntries((kvs ?? []).map((kv) => [kv.key, value(kv.value)]));
}

function hrTime(unixNano: string): HrTime {
  const n = BigInt(unixNano);
  return [Number(n / 1_000_000_000n), Number(n % 1_000_000_000n)];
}

/**
 * An OTLP JSON document as the finished spans the SDK hands its exporters
 * (one resource object per resourceSpans, as a provider has): exported, they
 * encode back to the same OTLP content (the documents hold strings, integers,
 * events and statuses only).
 */
export function readableSpans(doc: OtlpDocument): ReadableSpan[] {
  const out: ReadableSpan[] = [];
  for (const rs of doc.resourceSpans ?? []) {
    const resource = resourceFromAttributes(attributes(rs.resource?.attributes));
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        const start = hrTime(s.startTimeUnixNano);
        const end = hrTime(s.endTimeUnixNano);
        out.push({
          name: s.name,
          // OTLP numbers kinds from 1 (INTERNAL), the SDK from 0; an unset kind stays unset.
          kind: (s.kind === undefined ? undefined : s.kind - 1) as SpanKind,
          spanContext: () => ({ traceId: s.traceId, spanId: s.spanId, traceFlags: 1 }),
          ...(s.parentSpanId === undefined ? {} : { parentSpanContext: { traceId: s.traceId, spanId: s.parentSpanId, traceFlags: 1 } }),
          startTime: start,
          endTime: end,
          duration: [end[0] - start[0], end[1] - start[1]],
          status: { code: s.status?.code ?? 0, ...(s.status?.message === undefined ? {} : { message: s.status.message }) },
          attributes: attributes(s.attributes),
          links: [],
          events: (s.events ?? []).map((e) => ({
            name: e.name,
            time: hrTime(e.timeUnixNano),
            attributes: attributes(e.attributes),
            droppedAttributesCount: 0,
          })),
          ended: true,
          resource,
          instrumentationScope: { name: ss.scope?.name ?? '', ...(ss.scope?.version === undefined ? {} : { version: ss.scope.version }) },
          droppedAttributesCount: 0,
          droppedEventsCount: 0,
          droppedLinksCount: 0,
        });
      }
    }
  }
  return out;
}
