import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { BadRequestError, GRPC } from '@trace-ingest/shared/errors';
import type { OtlpExportRequest } from '@trace-ingest/shared/otlp-genai';
import { exceedsDepth } from './json-depth.js';

/**
 * OTLP/HTTP encodings of traces, from the official opentelemetry-proto
 * definitions (vendored under packages/server/proto, v1.11.0) through
 * protobufjs: binary protobuf, and the OTLP JSON encoding (proto3 JSON with
 * hex trace and span ids, integer enums, lowerCamelCase names, 64-bit
 * integers as strings or numbers, unknown fields ignored).
 */

export type OtlpFormat = 'protobuf' | 'json';

export const OTLP_TRACES_PATH = '/v1/traces';

/** Deeper than any real span's attribute values (kvlists in arrays in kvlists ...). */
export const MAX_OTLP_JSON_DEPTH = 64;

const PROTO_DIR = fileURLToPath(new URL('../proto', import.meta.url));

/** Answered 415 on this route (the catalog's OTLP answer for TI_ERR_CONTENT_TYPE). */
export class UnsupportedMediaTypeError extends BadRequestError {
  constructor(type: string) {
    super('TI_ERR_CONTENT_TYPE', `Content-Type must be application/x-protobuf or application/json for ${OTLP_TRACES_PATH} (got "${type.slice(0, 100)}")`);
  }
}

export class InvalidOtlpError extends BadRequestError {
  constructor(format: OtlpFormat, detail: string) {
    super(
      'TI_ERR_INVALID_OTLP',
      `request body is not a valid OTLP ExportTraceServiceRequest in ${format === 'json' ? 'OTLP JSON' : 'protobuf'}: ${detail.slice(0, 300)}`,
    );
  }
}

/** The format a request is in, by its Content-Type; what the answer is encoded in too. */
export function requestFormat(contentType: string | undefined): OtlpFormat | undefined {
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (type === 'application/x-protobuf' || type === 'application/protobuf') return 'protobuf';
  if (type === 'application/json') return 'json';
  return undefined;
}

type Obj = Record<string, unknown>;

export class OtlpCodec {
  /** The gRPC path of TraceService/Export, from the vendored service definition. */
  readonly exportPath: string;
  private readonly request: protobuf.Type;
  private readonly response: protobuf.Type;
  private readonly status: protobuf.Type;
  private readonly retryInfo: protobuf.Type;

  constructor(protoDir = PROTO_DIR) {
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) => path.join(protoDir, target);
    root.loadSync(['opentelemetry/proto/collector/trace/v1/trace_service.proto', 'google/rpc/status.proto', 'google/rpc/error_details.proto']);
    // AnyValue without its oneof accessor. protobufjs gives every message of a
    // oneof a `value` setter that deletes the other members, and the decoder
    // calls it for each attribute value: the deletes cost more than the rest of
    // the decode and leave the objects slow to read. Without the accessor the
    // decoder stores the member's name in a plain `value` property instead, and
    // the members are own properties exactly when sent (the mapping reads them
    // so; the golden tests hold both encodings to the same rows).
    const anyValue = root.lookupType('opentelemetry.proto.common.v1.AnyValue');
    anyValue.oneofs = undefined as unknown as typeof anyValue.oneofs;
    (anyValue as unknown as { _oneofsArray: null })._oneofsArray = null;
    root.resolveAll();
    // Strings through Buffer's native UTF-8 decoding (invalid sequences become
    // U+FFFD, as everywhere else in the service) instead of protobufjs's strict
    // JS decoder, which builds short strings a byte at a time: a third of the
    // decode time went there.
    lenientStrings(root);
    this.request = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
    this.response = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse');
    this.status = root.lookupType('google.rpc.Status');
    this.retryInfo = root.lookupType('google.rpc.RetryInfo');
    const service = root.lookupService('opentelemetry.proto.collector.trace.v1.TraceService');
    const exportMethod = service.methods.Export;
    if (exportMethod === undefined) throw new Error('the vendored trace_service.proto has no TraceService/Export');
    this.exportPath = `/${service.fullName.slice(1)}/${exportMethod.name}`;
    // protobufjs generates each type's decoder on first use: do it now, not on the first request.
    this.decodeRequest(this.encodeRequestFromJson(WARM_UP), 'protobuf');
    this.decodeRequest(Buffer.from(JSON.stringify(WARM_UP)), 'json');
    this.encodeResponse('protobuf', 1, 'warm-up');
    this.encodeStatus('protobuf', GRPC.INTERNAL, 'warm-up');
    this.encodeGrpcStatusDetails(GRPC.UNAVAILABLE, 'warm-up', 1);
  }

  decodeRequest(body: Buffer, format: OtlpFormat): OtlpExportRequest {
    if (format === 'protobuf') {
      try {
        return this.request.decode(body) as unknown as OtlpExportRequest;
      } catch (e) {
        throw new InvalidOtlpError(format, e instanceof Error ? e.message : String(e));
      }
    }
    if (body.length === 0) return {};
    if (exceedsDepth(body, MAX_OTLP_JSON_DEPTH)) throw new InvalidOtlpError(format, `nests arrays and objects deeper than ${MAX_OTLP_JSON_DEPTH} levels`);
    let value: unknown;
    try {
      value = JSON.parse(body.toString('utf8'));
    } catch (e) {
      throw new InvalidOtlpError(format, e instanceof Error ? e.message : 'parse error');
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidOtlpError(format, 'the body must be a JSON object');
    try {
      hexIdsToBytes(value as Obj);
      return this.request.fromObject(value as Obj) as unknown as OtlpExportRequest;
    } catch (e) {
      throw new InvalidOtlpError(format, e instanceof Error ? e.message : String(e));
    }
  }

  /** ExportTraceServiceResponse; `partial_success` only when spans were rejected. */
  encodeResponse(format: OtlpFormat, rejected: number, message: string): Buffer | string {
    const body = rejected > 0 ? { partialSuccess: { rejectedSpans: rejected, errorMessage: message } } : {};
    if (format === 'json') return JSON.stringify(rejected > 0 ? { partialSuccess: { rejectedSpans: String(rejected), errorMessage: message } } : {});
    return Buffer.from(this.response.encode(this.response.fromObject(body)).finish());
  }

  /**
   * A google.rpc.Status. The JSON form carries `error` beside `message` (the
   * same text), as every error body of this service does.
   */
  encodeStatus(format: OtlpFormat, grpcCode: number, message: string): Buffer | string {
    if (format === 'json') return JSON.stringify({ code: grpcCode, message, details: [], error: message });
    return Buffer.from(this.status.encode(this.status.fromObject({ code: grpcCode, message })).finish());
  }

  /**
   * The google.rpc.Status of a gRPC answer's `grpc-status-details-bin`
   * trailer, with a RetryInfo detail when a retry delay is given.
   */
  encodeGrpcStatusDetails(grpcCode: number, message: string, retryDelaySeconds?: number): Buffer {
    const details =
      retryDelaySeconds === undefined
        ? []
        : [
            {
              type_url: `type.googleapis.com/${this.retryInfo.fullName.slice(1)}`,
              value: this.retryInfo.encode(this.retryInfo.fromObject({ retryDelay: { seconds: retryDelaySeconds } })).finish(),
            },
          ];
    return Buffer.from(this.status.encode(this.status.fromObject({ code: grpcCode, message, details })).finish());
  }

  /** For tests: a `grpc-status-details-bin` trailer as its code, message and RetryInfo delay in seconds (if any). */
  decodeGrpcStatusDetails(bytes: Uint8Array): { code: number; message: string; retryDelaySeconds?: number } {
    const s = this.status.decode(bytes) as unknown as { code: number; message: string; details: { type_url: string; value: Uint8Array }[] };
    const retry = s.details.find((d) => d.type_url === `type.googleapis.com/${this.retryInfo.fullName.slice(1)}`);
    if (retry === undefined) return { code: s.code, message: s.message };
    const info = this.retryInfo.toObject(this.retryInfo.decode(retry.value), { longs: Number }) as { retryDelay?: { seconds?: number } };
    return { code: s.code, message: s.message, retryDelaySeconds: info.retryDelay?.seconds ?? 0 };
  }

  /** For tests and the benchmark: the protobuf bytes of an OTLP JSON document. */
  encodeRequestFromJson(doc: unknown): Buffer {
    const o = structuredClone(doc) as Obj;
    hexIdsToBytes(o);
    return Buffer.from(this.request.encode(this.request.fromObject(o)).finish());
  }

  decodeResponse(bytes: Uint8Array): Obj {
    return this.response.toObject(this.response.decode(bytes), { longs: Number, defaults: false });
  }

  decodeStatus(bytes: Uint8Array): Obj {
    return this.status.toObject(this.status.decode(bytes), { defaults: true });
  }
}

function lenientStrings(ns: protobuf.NamespaceBase): void {
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type) {
      for (const field of nested.fieldsArray) {
        const features = (field as unknown as { _features?: { utf8_validation?: string } })._features;
        if (field.type === 'string' && features !== undefined)
          (field as unknown as { _features: Record<string, unknown> })._features = { ...features, utf8_validation: 'NONE' };
      }
    }
    if (nested instanceof protobuf.Namespace) lenientStrings(nested);
  }
}

/** One span with a value of every AnyValue kind, an event and a link: it reaches every message type. */
const WARM_UP = {
  resourceSpans: [
    {
      resource: { attributes: [{ key: 's', value: { stringValue: 'x' } }] },
      scopeSpans: [
        {
          scope: { name: 'warm-up' },
          spans: [
            {
              traceId: '0102030405060708090a0b0c0d0e0f10',
              spanId: '0102030405060708',
              name: 'warm-up',
              startTimeUnixNano: '1',
              endTimeUnixNano: '2',
              attributes: [
                { key: 'i', value: { intValue: '1' } },
                { key: 'd', value: { doubleValue: 1.5 } },
                { key: 'b', value: { boolValue: true } },
                { key: 'a', value: { arrayValue: { values: [{ stringValue: 'x' }] } } },
                { key: 'k', value: { kvlistValue: { values: [{ key: 'x', value: { bytesValue: 'AQ==' } }] } } },
              ],
              events: [{ name: 'e', timeUnixNano: '1', attributes: [] }],
              links: [{ traceId: '0102030405060708090a0b0c0d0e0f10', spanId: '0102030405060708' }],
              status: { code: 2, message: 'x' },
            },
          ],
        },
      ],
    },
  ],
};

const HEX = /^(?:[0-9a-fA-F]{2})*$/;

/** OTLP JSON carries ids as hex, where proto3 JSON has base64: turn them into bytes before `fromObject`. */
function hexIdsToBytes(req: Obj): void {
  for (const rs of arr(req.resourceSpans)) {
    for (const ss of arr((rs as Obj).scopeSpans)) {
      for (const span of arr((ss as Obj).spans)) {
        const s = span as Obj;
        idField(s, 'traceId');
        idField(s, 'spanId');
        idField(s, 'parentSpanId');
        for (const link of arr(s.links)) {
          idField(link as Obj, 'traceId');
          idField(link as Obj, 'spanId');
        }
      }
    }
  }
}

function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v.filter((x) => typeof x === 'object' && x !== null) : [];
}

function idField(o: Obj, field: string): void {
  const v = o[field];
  if (typeof v !== 'string') return;
  // An id that is not hex becomes empty bytes: the mapping rejects that span by name, and the rest of the request is kept.
  o[field] = HEX.test(v) ? Buffer.from(v, 'hex') : Buffer.alloc(0);
}
