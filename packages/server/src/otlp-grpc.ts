import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import express from 'express';
import proxyaddr from 'proxy-addr';
import { BadRequestError, InternalError, otlpGrpcAnswer, PayloadTooLargeError, TiError } from '@trace-ingest/shared/errors';
import type { ResolvedKey } from '@trace-ingest/store/control-store-types';
import { storeOtlp, type OtlpDeps } from './otlp.js';
import { admit, logFailure, noop, refused, requestId, SMALL_BODY_BYTES, type Caller } from './pipeline.js';

/*
 * OTLP/gRPC: TraceService/Export on its own listener (@grpc/grpc-js), through
 * the same steps as POST /v1/traces. An interceptor admits each call on its
 * metadata (drain, key, rate limit, quota) before grpc-js reads the request
 * message, as the HTTP routes decide on headers before reading a body; the
 * handler then runs the shared OTLP steps on the message and answers once the
 * write log holds the batch. Every status the call ends with, ours or
 * grpc-js's own, becomes the catalog's answer and is logged and counted once.
 */

type GrpcStatus = Parameters<grpc.ServerInterceptingCallInterface['sendStatus']>[0];

export interface OtlpGrpcOptions {
  port: number;
  host: string;
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: calls open at once on one connection. */
  maxStreams: number;
  /** A call's request message must have arrived this long after the call began (REQUEST_TIMEOUT_MS). */
  receiveTimeoutMs: number;
  /** The server pings each connection this often, and closes one whose ping is not answered in `keepaliveTimeoutMs`. */
  keepaliveTimeMs?: number;
  keepaliveTimeoutMs?: number;
  /** A connection without calls for this long is closed (GOAWAY); its client reconnects on its next export. */
  maxConnectionIdleMs?: number;
  /** A connection is asked to reconnect after this long, so clients spread over replicas behind a load balancer. */
  maxConnectionAgeMs?: number;
  /** TRUST_PROXY: the proxies whose x-forwarded-for metadata names the client, as on the HTTP listeners. */
  trustProxy?: string | false;
}

/** Dead peers are found within 80 s, as gRPC's own keepalive defaults would after 2 hours. */
const KEEPALIVE_TIME_MS = 60_000;
const KEEPALIVE_TIMEOUT_MS = 20_000;
const MAX_CONNECTION_IDLE_MS = 5 * 60_000;
const MAX_CONNECTION_AGE_MS = 30 * 60_000;
const READY_PROBE_TIMEOUT_MS = 1000;

/** One Export call, from its metadata to its status. */
interface ExportCall {
  reqId: string;
  readonly started: number;
  key?: ResolvedKey;
  now: number;
  /** The request message has arrived (a cancel after it leaves the batch to be stored). */
  received: boolean;
  /** The refusal our code answers with, and what caused it. */
  error?: TiError;
  cause?: unknown;
  ended: boolean;
  timer?: NodeJS.Timeout;
}

export class OtlpGrpcServer {
  private readonly server: grpc.Server;
  /** The admitted calls, by the metadata object grpc-js hands on to the handler. */
  private readonly calls = new WeakMap<grpc.Metadata, ExportCall>();
  private readonly path: string;
  private boundPort: number | undefined;
  private closing = false;
  private readonly clientOf: (call: grpc.ServerInterceptingCallInterface, metadata: grpc.Metadata) => string | undefined;

  constructor(
    private readonly deps: OtlpDeps,
    private readonly opts: OtlpGrpcOptions,
  ) {
    this.path = deps.otlp.codec.exportPath;
    this.clientOf = clientAddress(opts.trustProxy ?? false);
    const age = opts.maxConnectionAgeMs ?? MAX_CONNECTION_AGE_MS;
    this.server = new grpc.Server({
      // The size limit of the HTTP routes, on the message's declared length and again after decompression.
      'grpc.max_receive_message_length': deps.maxBodyBytes,
      'grpc.max_concurrent_streams': opts.maxStreams,
      'grpc.keepalive_time_ms': opts.keepaliveTimeMs ?? KEEPALIVE_TIME_MS,
      'grpc.keepalive_timeout_ms': opts.keepaliveTimeoutMs ?? KEEPALIVE_TIMEOUT_MS,
      'grpc.max_connection_idle_ms': opts.maxConnectionIdleMs ?? MAX_CONNECTION_IDLE_MS,
      'grpc.max_connection_age_ms': age,
      // A call already running when its connection reaches its age may take as long as any request may.
      'grpc.max_connection_age_grace_ms': opts.receiveTimeoutMs,
      // grpc.enable_channelz is left on: forceShutdown (the drain's bound) ends only the connections channelz tracks.
      interceptors: [(method, call) => (method.path === this.path ? this.intercept(call) : new grpc.ServerInterceptingCall(call))],
    });
    this.server.addService(traceServiceDefinition(this.path), {
      Export: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => void this.export(call, cb),
    });
  }

  /** The bound port (the configured one, or the one picked for port 0); 0 before `start`. */
  get port(): number {
    return this.boundPort ?? 0;
  }

  async start(): Promise<void> {
    const host = this.opts.host.includes(':') ? `[${this.opts.host}]` : this.opts.host;
    this.boundPort = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(`${host}:${this.opts.port}`, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)));
    });
  }

  /** For /readyz: the listener accepts connections. */
  async check(): Promise<void> {
    if (this.boundPort === undefined || this.closing) throw new Error('the OTLP/gRPC listener is not listening');
    const host = this.opts.host === '0.0.0.0' ? '127.0.0.1' : this.opts.host === '::' ? '::1' : this.opts.host;
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect({ host, port: this.boundPort ?? 0, timeout: READY_PROBE_TIMEOUT_MS });
      const fail = (why: string) => {
        socket.destroy();
        reject(new Error(`the OTLP/gRPC listener on port ${this.boundPort} does not accept connections: ${why}`));
      };
      socket.once('connect', () => {
        socket.destroy();
        resolve();
      });
      socket.once('timeout', () => fail(`no answer within ${READY_PROBE_TIMEOUT_MS} ms`));
      socket.once('error', (e) => fail(e.message));
    });
  }

  /**
   * Stops listening and lets the calls in flight finish (each connection is
   * sent a GOAWAY and closes when its calls are done); after `timeoutMs` the
   * calls left are cancelled.
   */
  async close(timeoutMs: number): Promise<void> {
    this.closing = true;
    // A listener that never bound (a failed start) has nothing to let finish.
    if (this.boundPort === undefined) {
      this.server.forceShutdown();
      return;
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, timeoutMs);
      this.server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Admits the call on its metadata; grpc-js reads the request message only once the metadata is passed on. */
  private intercept(base: grpc.ServerInterceptingCallInterface): grpc.ServerInterceptingCall {
    const call: ExportCall = { reqId: '', started: performance.now(), now: 0, received: false, ended: false };
    // grpc-js answers some refusals itself, from below every interceptor (a message over the size limit,
    // undecodable compression, the client's deadline): this call's own sendStatus is where they pass.
    const send = base.sendStatus.bind(base);
    base.sendStatus = (status) => send(this.ended(call, status));
    call.timer = setTimeout(() => {
      const e = new TiError('TI_ERR_BAD_HTTP', `the request message did not arrive within ${this.opts.receiveTimeoutMs} ms; send smaller batches`, {
        status: 408,
      });
      this.refuse(base, call, e);
    }, this.opts.receiveTimeoutMs);
    call.timer.unref();
    return new grpc.ServerInterceptingCall(base, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            call.reqId = requestId(metadata.get('x-request-id')[0]);
            const caller: Caller = {
              credentials: { headers: headersOf(metadata) },
              // The failed-authentication limit counts the client's address, as on the HTTP listeners.
              auth: { client: this.clientOf(base, metadata), listener: 'grpc' },
              onKey: (key) => (call.key = key),
            };
            admit(caller, this.deps).then(
              ({ now }) => {
                call.now = now;
                this.calls.set(metadata, call);
                pass(metadata);
              },
              (e: unknown) => this.refuse(base, call, e),
            );
          },
          onReceiveMessage: (message, pass) => {
            call.received = true;
            clearTimeout(call.timer);
            pass(message);
          },
          onCancel: () => {
            // The client cancelled or its connection was lost: nothing is sent back.
            if (call.ended) return;
            this.ended(call, { code: grpc.status.CANCELLED, details: 'cancelled by the client' });
          },
        }),
    });
  }

  /** Ends a call with the catalog's answer to an error. */
  private refuse(base: grpc.ServerInterceptingCallInterface, call: ExportCall, err: unknown): void {
    if (call.ended) return;
    call.error = err instanceof TiError ? err : new InternalError(err, 'batch');
    call.cause = err;
    base.sendStatus(this.statusOf(call.error));
  }

  private async export(unary: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>): Promise<void> {
    const call = this.calls.get(unary.metadata);
    try {
      // Every call of this method passes the interceptor, which admits it before it gets here.
      if (call?.key === undefined) throw new Error('an OTLP/gRPC call reached its handler without being admitted');
      const body = unary.request;
      // The message is in memory already (grpc-js reads it whole): a large one takes a slot for its decoded objects and rows.
      const release = body.length > SMALL_BODY_BYTES ? await this.deps.slots.acquire() : noop;
      const { rejected, message } = await storeOtlp({ body, release }, 'protobuf', this.deps, call.key, call.now, call.started, '200');
      callback(null, this.deps.otlp.codec.encodeResponse('protobuf', rejected, message) as Buffer);
    } catch (err) {
      const e = err instanceof TiError ? err : new InternalError(err, 'batch');
      if (call !== undefined) {
        call.error = e;
        call.cause = err;
      }
      const status = this.statusOf(e);
      callback(Object.assign(new Error(status.details), status));
    }
  }

  /** A status with the catalog's code, the error's message, and a RetryInfo detail where the error says when to come back. */
  private statusOf(e: TiError): GrpcStatus & { metadata: grpc.Metadata } {
    const { code, retryDelaySeconds } = otlpGrpcAnswer(e);
    const metadata = new grpc.Metadata();
    metadata.set('grpc-status-details-bin', this.deps.otlp.codec.encodeGrpcStatusDetails(code, e.message, retryDelaySeconds));
    return { code, details: e.message, metadata };
  }

  /** The status a call ends with, once: grpc-js's own refusals as the catalog's errors, then the log line and the metrics. */
  private ended(call: ExportCall, status: GrpcStatus): GrpcStatus {
    if (call.ended) return status;
    call.ended = true;
    clearTimeout(call.timer);
    let out = status;
    let e = call.error;
    if (e === undefined && status.code !== grpc.status.OK) {
      // A client that cancelled, or whose deadline passed, hears nothing more; a request it sent is still stored.
      const gone = status.code === grpc.status.CANCELLED || status.code === grpc.status.DEADLINE_EXCEEDED;
      if (!gone) {
        e = grpcLayerError(status, this.deps.maxBodyBytes);
        out = this.statusOf(e);
      } else if (!call.received) {
        e = new TiError('TI_ERR_ABORTED', `the call ended before its request arrived: ${status.details}`);
      }
    }
    if (e !== undefined) {
      logFailure(this.deps.logger, e, call.cause ?? e, call.reqId);
      refused(this.deps.metrics, e);
    }
    const metadata = out.metadata?.clone() ?? new grpc.Metadata();
    metadata.set('x-request-id', call.reqId);
    const name = grpc.status[out.code] ?? String(out.code);
    this.deps.metrics.grpcRequests.inc({ method: 'TraceService/Export', code: name });
    this.deps.logger.info(
      {
        reqId: call.reqId,
        transport: 'grpc',
        path: this.path,
        grpcStatus: name,
        durationMs: Math.round((performance.now() - call.started) * 100) / 100,
        orgId: call.key?.orgId,
        keyPrefix: call.key?.prefix,
        code: e?.code,
      },
      'request',
    );
    return { ...out, metadata };
  }
}

/**
 * TraceService/Export with raw bytes both ways (the request is decoded by the
 * codec the HTTP route uses, the answer encoded by it): the server's
 * definition, and a client's (tests, the benchmark's load generator).
 */
export function traceServiceDefinition(path: string): grpc.ServiceDefinition {
  const pass = (b: Buffer): Buffer => b;
  return {
    Export: {
      path,
      requestStream: false,
      responseStream: false,
      requestSerialize: pass,
      requestDeserialize: pass,
      responseSerialize: pass,
      responseDeserialize: pass,
    },
  };
}

/**
 * The refusals grpc-js answers by itself, as the errors the HTTP routes
 * answer the same conditions with: a message over the limit (its declared
 * length, or once inflated), compression that cannot be undone, a call that
 * is not one request message.
 */
function grpcLayerError(status: GrpcStatus, maxBytes: number): TiError {
  if (status.code === grpc.status.RESOURCE_EXHAUSTED) return new PayloadTooLargeError(maxBytes);
  if (/compress|encoding/i.test(status.details))
    return new BadRequestError('TI_ERR_CONTENT_ENCODING', `${status.details}; send the message uncompressed or gzip-compressed`);
  return new BadRequestError('TI_ERR_BAD_REQUEST', `${status.details}; TraceService/Export takes one ExportTraceServiceRequest`);
}

/**
 * The client of a call by the rule of `req.ip` on the HTTP listeners: the
 * peer's address, or with TRUST_PROXY the x-forwarded-for entry of the first
 * untrusted hop (Express's own trust function and proxy-addr, so the rule is
 * the same on every listener, a TLS proxy in front of this one included).
 */
function clientAddress(trustProxy: string | false): (call: grpc.ServerInterceptingCallInterface, metadata: grpc.Metadata) => string | undefined {
  const trust = express().set('trust proxy', trustProxy).get('trust proxy fn') as (addr: string, i: number) => boolean;
  return (call, metadata) => {
    const remoteAddress = call.getConnectionInfo().remoteAddress;
    if (remoteAddress === undefined) return undefined;
    const forwarded = metadata.get('x-forwarded-for').map(String).join(', ');
    return proxyaddr({ socket: { remoteAddress }, headers: { 'x-forwarded-for': forwarded } } as unknown as IncomingMessage, trust);
  };
}

/**
 * The call's metadata as the headers of the HTTP routes' key check: text
 * entries only, a name sent twice as an array (refused there, as two HTTP
 * headers of one name are).
 */
function headersOf(metadata: grpc.Metadata): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, values] of Object.entries(metadata.toJSON())) {
    // Binary entries carry no key; the message's size is checked on its gRPC frame, not on an HTTP/2 header.
    if (name.endsWith('-bin') || name === 'content-length') continue;
    const texts = values.map(String);
    headers[name] = texts.length === 1 ? (texts[0] ?? '') : texts;
  }
  return headers;
}
