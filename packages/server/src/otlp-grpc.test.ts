import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { BufferFullError, GRPC, UnauthorizedError } from '@trace-ingest/shared/errors';
import { DEFAULT_OTLP_MAPPING } from '@trace-ingest/shared/otlp-genai';
import { UNPRICED } from '@trace-ingest/shared/rows';
import { exportCall } from '../../../test/grpc-client.js';
import { makeResolvedKey } from '../../../test/factories.js';
import { presentedKey } from './auth.js';
import { BodySlots } from './body.js';
import { Metrics } from './metrics.js';
import { OtlpCodec } from './otlp-codec.js';
import type { OtlpDeps } from './otlp.js';
import { OtlpGrpcServer, type OtlpGrpcOptions } from './otlp-grpc.js';
import { MemoryRateLimiter } from './rate-limit.js';

// The OTLP/gRPC listener in process, over fakes of the stores and the write log; real grpc-js, real
// sockets. The real server with the real exporter is in test/integration/otlp-grpc.test.ts.

const KEY = 'ti_' + 'g'.repeat(43);
const RESOLVED = makeResolvedKey(KEY, { keyId: 'key_g', orgId: 'org_g' });
const codec = new OtlpCodec();
const REQUEST = codec.encodeRequestFromJson({
  resourceSpans: [
    {
      scopeSpans: [
        { spans: [{ traceId: '0102030405060708090a0b0c0d0e0f10', spanId: '0102030405060708', name: 'chat', startTimeUnixNano: '1', endTimeUnixNano: '2' }] },
      ],
    },
  ],
});

async function listener(over: Partial<OtlpDeps> = {}, opts: Partial<OtlpGrpcOptions> = {}) {
  const errors: unknown[] = [];
  const deps: OtlpDeps = {
    maxBodyBytes: 64 * 1024,
    auth: { authenticate: (h) => (presentedKey(h) === KEY ? Promise.resolve(RESOLVED) : Promise.reject(new UnauthorizedError())) },
    limiter: new MemoryRateLimiter(),
    quota: { check: () => Promise.resolve(), add: () => Promise.resolve(), close: () => Promise.resolve() },
    pricing: { refresh: () => Promise.resolve(), price: () => UNPRICED },
    log: { append: () => Promise.resolve() },
    flusher: { notify: () => undefined },
    slots: new BodySlots(2),
    metrics: new Metrics({ defaultMetrics: false }),
    logger: pino({ level: 'error' }, { write: (line: string) => void errors.push(JSON.parse(line)) }),
    isDraining: () => false,
    otlp: { codec, mapping: DEFAULT_OTLP_MAPPING },
    ...over,
  };
  const server = new OtlpGrpcServer(deps, { port: 0, host: '127.0.0.1', maxStreams: 4, receiveTimeoutMs: 5000, ...opts });
  await server.start();
  onTestFinished(() => server.close(100));
  return { server, errors };
}

async function exportTo(port: number, body: Buffer): Promise<grpc.ServiceError | undefined> {
  return (await exportCall(`127.0.0.1:${port}`, codec.exportPath, body, { 'x-api-key': KEY })).error;
}

function connect(port: number): http2.ClientHttp2Session {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  onTestFinished(() => session.destroy());
  return session;
}

describe('the OTLP/gRPC listener', () => {
  it('closes a connection left idle, and pings the ones it keeps', async () => {
    const { server } = await listener({}, { maxConnectionIdleMs: 300, keepaliveTimeMs: 100, keepaliveTimeoutMs: 1000 });
    const idle = connect(server.port);
    const pinged = new Promise<void>((resolve) => idle.once('ping', () => resolve()));
    const goaway = new Promise<number>((resolve) => idle.once('goaway', (code) => resolve(code)));
    const started = performance.now();
    await pinged;
    expect(await goaway).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
  });

  it('is ready while it listens, and not once closed', async () => {
    const { server } = await listener();
    await expect(server.check()).resolves.toBeUndefined();
    await server.close(100);
    await expect(server.check()).rejects.toThrow(/not listening/);
  });

  it('bounds a drain: a call still running when the bound passes is cancelled', async () => {
    let entered: () => void = () => undefined;
    const appending = new Promise<void>((r) => (entered = r));
    const { server } = await listener({ log: { append: () => (entered(), new Promise<void>(() => undefined)) } });
    const answer = exportTo(server.port, REQUEST);
    await appending;
    const started = performance.now();
    await server.close(300);
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
    expect((await answer)?.code).toBe(grpc.status.CANCELLED);
  });

  it('answers a full write log with UNAVAILABLE and its Retry-After as RetryInfo', async () => {
    const { server } = await listener({ log: { append: () => Promise.reject(new BufferFullError(7)) } });
    const e = await exportTo(server.port, REQUEST);
    expect(e?.code).toBe(GRPC.UNAVAILABLE);
    const details = e?.metadata.get('grpc-status-details-bin')[0];
    expect(details instanceof Buffer ? codec.decodeGrpcStatusDetails(details) : undefined).toEqual({
      code: GRPC.UNAVAILABLE,
      message: 'write buffer is full while the span store catches up; retry later',
      retryDelaySeconds: 7,
    });
  });

  it('answers a failing write log with INTERNAL, and logs the cause once, at error', async () => {
    const { server, errors } = await listener({ log: { append: () => Promise.reject(new Error('EIO: disk gone')) } });
    const e = await exportTo(server.port, REQUEST);
    expect(e?.code).toBe(GRPC.INTERNAL);
    expect(e?.details).toBe('internal error; the batch was not accepted, retry it');
    expect(errors).toEqual([expect.objectContaining({ code: 'TI_ERR_INTERNAL', err: expect.objectContaining({ message: 'EIO: disk gone' }) })]);
  });
});
