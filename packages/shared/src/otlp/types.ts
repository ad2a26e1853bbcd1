import type { Trace } from '../schema.js';

/**
 * The decoded ExportTraceServiceRequest, described structurally so that both
 * the protobuf decoder's messages and plain objects (OTLP JSON) fit. 64-bit
 * integers may be numbers, decimal strings or Long-like `{ low, high,
 * unsigned }` objects. A oneof (AnyValue) member counts as set when it is an
 * own property.
 */

export type Int64Like = number | string | { low: number; high: number; unsigned?: boolean };

export interface OtlpAnyValue {
  stringValue?: string | null;
  boolValue?: boolean | null;
  intValue?: Int64Like | null;
  doubleValue?: number | null;
  arrayValue?: { values?: readonly OtlpAnyValue[] | null } | null;
  kvlistValue?: { values?: readonly OtlpKeyValue[] | null } | null;
  bytesValue?: Uint8Array | null;
}

export interface OtlpKeyValue {
  key?: string | null;
  value?: OtlpAnyValue | null;
}

export interface OtlpEvent {
  timeUnixNano?: Int64Like | null;
  name?: string | null;
  attributes?: readonly OtlpKeyValue[] | null;
}

export interface OtlpSpan {
  traceId?: Uint8Array | null;
  spanId?: Uint8Array | null;
  parentSpanId?: Uint8Array | null;
  name?: string | null;
  kind?: number | null;
  startTimeUnixNano?: Int64Like | null;
  endTimeUnixNano?: Int64Like | null;
  attributes?: readonly OtlpKeyValue[] | null;
  events?: readonly OtlpEvent[] | null;
  status?: { code?: number | null; message?: string | null } | null;
}

export interface OtlpResourceSpans {
  resource?: { attributes?: readonly OtlpKeyValue[] | null } | null;
  scopeSpans?: readonly { scope?: { name?: string | null; version?: string | null } | null; spans?: readonly OtlpSpan[] | null }[] | null;
}

export interface OtlpExportRequest {
  resourceSpans?: readonly OtlpResourceSpans[] | null;
}

export interface OtlpMappingOptions {
  /** Attributes read, in order, for the customer id (span first, then resource). */
  customerAttributes: readonly string[];
  /** Attributes read, in order, for the session id (span first, then resource). */
  sessionAttributes: readonly string[];
}

export const DEFAULT_OTLP_MAPPING: OtlpMappingOptions = {
  customerAttributes: ['enduser.id', 'user.id'],
  sessionAttributes: ['session.id', 'gen_ai.conversation.id'],
};

export interface MappedTraces {
  /** v1 traces; one OTLP trace may give several (one per resource, and at most 2000 spans each). */
  traces: Trace[];
  /** Spans mapped into `traces`. */
  spans: number;
  /** Spans that could not be mapped, and why (the first few reasons). */
  rejected: number;
  rejectReasons: string[];
}
