import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import {
  BadRequestError,
  BufferFullError,
  DrainingError,
  InternalError,
  MethodNotAllowedError,
  PayloadTooLargeError,
  QuotaExceededError,
  RateLimitedError,
  ServiceUnavailableError,
  GRPC,
  otlpAnswer,
  UnauthorizedError,
  type TiError,
} from '@trace-ingest/shared/errors';
import { InvalidOtlpError, OtlpCodec, requestFormat, UnsupportedMediaTypeError } from './otlp-codec.js';

const RETRYABLE = new Set([429, 502, 503, 504]);

describe('OTLP status mapping', () => {
  it.each<[string, TiError, number, number]>([
    ['invalid body', new InvalidOtlpError('json', 'x'), 400, GRPC.INVALID_ARGUMENT],
    ['bad encoding', new BadRequestError('TI_ERR_CONTENT_ENCODING', 'x'), 400, GRPC.INVALID_ARGUMENT],
    ['bad key', new UnauthorizedError(), 401, GRPC.UNAUTHENTICATED],
    ['quota used up', new QuotaExceededError(10), 403, GRPC.RESOURCE_EXHAUSTED],
    ['method', new MethodNotAllowedError('GET', '/v1/traces', ['POST']), 405, GRPC.UNIMPLEMENTED],
    ['too large', new PayloadTooLargeError(10), 413, GRPC.INVALID_ARGUMENT],
    ['content type', new UnsupportedMediaTypeError('text/plain'), 415, GRPC.INVALID_ARGUMENT],
    ['rate limit', new RateLimitedError(1, 5), 429, GRPC.RESOURCE_EXHAUSTED],
    ['draining', new DrainingError(), 503, GRPC.UNAVAILABLE],
    ['buffer full', new BufferFullError(2), 503, GRPC.UNAVAILABLE],
    ['backend down', new ServiceUnavailableError('redis down'), 503, GRPC.UNAVAILABLE],
    ['internal', new InternalError(new Error('x')), 500, GRPC.INTERNAL],
  ])('%s → HTTP %i, google.rpc.Code %i', (_name, e, http, grpc) => {
    expect(otlpAnswer(e)).toEqual({ http, grpc });
  });

  it('only what is worth retrying gets a status OTLP exporters retry, and it carries Retry-After', () => {
    for (const e of [new QuotaExceededError(1), new UnauthorizedError(), new InvalidOtlpError('protobuf', 'x'), new PayloadTooLargeError(1)])
      expect(RETRYABLE.has(otlpAnswer(e).http)).toBe(false);
    for (const e of [new RateLimitedError(2, 1), new DrainingError(), new BufferFullError(1)]) {
      expect(RETRYABLE.has(otlpAnswer(e).http)).toBe(true);
      expect(e.headers['Retry-After']).toMatch(/^[1-9]\d*$/);
    }
  });
});

describe('OtlpCodec', () => {
  const codec = new OtlpCodec();

  it('picks the format from Content-Type', () => {
    expect(requestFormat('application/x-protobuf')).toBe('protobuf');
    expect(requestFormat('application/json; charset=utf-8')).toBe('json');
    expect(requestFormat('text/plain')).toBeUndefined();
    expect(requestFormat(undefined)).toBeUndefined();
  });

  it('encodes a google.rpc.Status in both encodings', () => {
    expect(codec.decodeStatus(codec.encodeStatus('protobuf', 8, 'quota') as Buffer)).toMatchObject({ code: 8, message: 'quota' });
    expect(JSON.parse(codec.encodeStatus('json', 16, 'key') as string)).toEqual({ code: 16, message: 'key', details: [], error: 'key' });
  });

  it('encodes partial success only when spans were rejected', () => {
    expect(codec.decodeResponse(codec.encodeResponse('protobuf', 0, '') as Buffer)).toEqual({});
    expect(codec.decodeResponse(codec.encodeResponse('protobuf', 2, 'why') as Buffer)).toEqual({ partialSuccess: { rejectedSpans: 2, errorMessage: 'why' } });
    expect(JSON.parse(codec.encodeResponse('json', 2, 'why') as string)).toEqual({ partialSuccess: { rejectedSpans: '2', errorMessage: 'why' } });
  });

  it('decodes the JSON and protobuf forms of one document to the same spans, ids as bytes', () => {
    const doc = {
      resourceSpans: [
        {
          scopeSpans: [
            {
              spans: [
                {
                  traceId: '5b8efff798038103d269b633813fc60c',
                  spanId: 'eee19b7ec3c1b174',
                  name: 'x',
                  kind: 2,
                  startTimeUnixNano: 1544712660000000000,
                  endTimeUnixNano: '1544712661000000000',
                  attributes: [{ key: 'k', value: { intValue: '42' } }],
                  someFutureField: true,
                },
              ],
            },
          ],
        },
      ],
    };
    for (const req of [codec.decodeRequest(Buffer.from(JSON.stringify(doc)), 'json'), codec.decodeRequest(codec.encodeRequestFromJson(doc), 'protobuf')]) {
      const span = req.resourceSpans?.[0]?.scopeSpans?.[0]?.spans?.[0];
      expect(Buffer.from(span?.traceId ?? []).toString('hex')).toBe('5b8efff798038103d269b633813fc60c');
      expect(Buffer.from(span?.spanId ?? []).toString('hex')).toBe('eee19b7ec3c1b174');
      expect(String(span?.endTimeUnixNano)).toBe('1544712661000000000');
      expect(span?.attributes?.[0]?.value?.intValue?.toString()).toBe('42');
      expect(Object.prototype.hasOwnProperty.call(span?.attributes?.[0]?.value, 'stringValue')).toBe(false);
    }
  });

  it('refuses what is not an ExportTraceServiceRequest', () => {
    expect(() => codec.decodeRequest(Buffer.from('{"resourceSpans": 5}'), 'json')).toThrow(InvalidOtlpError);
    expect(() => codec.decodeRequest(Buffer.from('[1]'), 'json')).toThrow(/must be a JSON object/);
    expect(() => codec.decodeRequest(Buffer.from([0x0f, 0xff]), 'protobuf')).toThrow(InvalidOtlpError);
    expect(() => codec.decodeRequest(Buffer.from('['.repeat(100)), 'json')).toThrow(/deeper than/);
  });
});

describe('the protobufjs internals the codec patches', () => {
  const codec = new OtlpCodec();
  const doc = {
    resourceSpans: [
      {
        scopeSpans: [
          {
            spans: [
              {
                traceId: '0102030405060708090a0b0c0d0e0f10',
                spanId: '0102030405060708',
                name: '\u00ffZZ',
                startTimeUnixNano: '1',
                endTimeUnixNano: '2',
                attributes: [{ key: 'k', value: { stringValue: 'v' } }],
              },
            ],
          },
        ],
      },
    ],
  };
  const first = (r: ReturnType<OtlpCodec['decodeRequest']>) => r.resourceSpans?.[0]?.scopeSpans?.[0]?.spans?.[0];

  it('are those of the pinned minor version (a new minor must be checked against these tests before the pin moves)', () => {
    const require = createRequire(import.meta.url);
    const installed = (require('protobufjs/package.json') as { version: string }).version;
    const pinned = (require('../package.json') as { dependencies: Record<string, string> }).dependencies.protobufjs ?? '';
    expect(pinned).toMatch(/^~\d+\.\d+\.\d+$/);
    expect(installed.split('.').slice(0, 2)).toEqual(pinned.slice(1).split('.').slice(0, 2));
  });

  it('still take the oneof accessor off AnyValue: the set member is an own property, the others are not', () => {
    const value = first(codec.decodeRequest(codec.encodeRequestFromJson(doc), 'protobuf'))?.attributes?.[0]?.value as object;
    expect(Object.prototype.hasOwnProperty.call(value, 'stringValue')).toBe(true);
    expect(Object.prototype.hasOwnProperty.call(value, 'intValue')).toBe(false);
    // No getter/setter named `value` anywhere on the chain: the decoder wrote a plain property instead.
    for (let o: object | null = value; o !== null; o = Object.getPrototypeOf(o) as object | null) {
      expect(Object.getOwnPropertyDescriptor(o, 'value')?.get).toBeUndefined();
    }
  });

  it('still decode strings leniently: invalid UTF-8 becomes U+FFFD instead of failing the request', () => {
    const buf = codec.encodeRequestFromJson(doc);
    const at = buf.indexOf(Buffer.from('\u00ffZZ'));
    buf[at] = 0xff;
    buf[at + 1] = 0xfe;
    expect(first(codec.decodeRequest(buf, 'protobuf'))?.name).toBe('\ufffd\ufffdZZ');
  });
});
