import { createHash, randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { DrainingError, refusalReason, ServiceUnavailableError, TiError } from '@trace-ingest/shared/errors';
import { encodeSpanLine, encodeTraceHead } from '@trace-ingest/shared/rows';
import { compiledPolicyFor } from '@trace-ingest/shared/content-policy';
import { retentionCuts } from '@trace-ingest/shared/lifecycle';
import { isUnpriced } from '@trace-ingest/shared/unpriced';
import type { Span, Trace } from '@trace-ingest/shared/schema';
import type { ResolvedKey } from '@trace-ingest/store/control-store-types';
import type { Pricing } from '@trace-ingest/store/pricing';
import type { AuthOptions, Authenticator, CredentialSource } from './auth.js';
import { checkDeclaredLength, decodeBody, isCompressed, readBody, receiveBody, type BodySlots } from './body.js';
import type { Flusher } from './flusher.js';
import type { Metrics } from './metrics.js';
import type { QuotaCounter } from './quota.js';
import type { RateLimiter } from './rate-limit.js';
import type { WriteLog } from './write-log.js';
import { refusalLogOf } from './refusal-log.js';

/*
 * The steps every ingest route shares, in the contract's order: admit (size,
 * key, rate limit and quota), then, once the route has its traces (v1 JSON or
 * OTLP), price and encode them, and after the write log holds them, count
 * them as accepted. POST /ingest (ingest.ts) and POST /v1/traces (otlp.ts)
 * differ only in how the body becomes traces.
 */

/** What the handler uses of each part, so tests can hand in a fake for one of them. */
export interface IngestDeps {
  maxBodyBytes: number;
  auth: Pick<Authenticator, 'authenticate'>;
  limiter: RateLimiter;
  quota: QuotaCounter;
  /** Prices spans; `refresh` picks up override changes before each batch. */
  pricing: Pick<Pricing, 'refresh' | 'price'>;
  log: Pick<WriteLog, 'append'>;
  flusher: Pick<Flusher, 'notify'>;
  slots: Pick<BodySlots, 'acquire'>;
  /** Slots of their own for small compressed bodies, once arrived: they never queue behind a large body still arriving. */
  inflateSlots?: Pick<BodySlots, 'acquire'>;
  /** The least rate a large body must arrive at while it holds a slot (0: none). */
  minBodyBytesPerSec?: number;
  metrics: Metrics;
  logger: Logger;
  isDraining: () => boolean;
  /** The install's text retention in days (0: as long as the row), for orgs without their own. */
  textRetentionDays?: number;
  /** Set while batches must be refused although the server runs (the span store's file is gone). */
  refusal?: () => string | undefined;
}

/**
 * Who sends a batch, as `admit` needs it: the credential's source (an HTTP
 * request, or a gRPC call's metadata as headers), and for the key check the
 * client's address (the failed-authentication limit), the listener, and the
 * status of a key without the ingest scope. `onKey` learns the key as soon as
 * it is known, so a refusal by the limits is logged under it.
 */
export interface Caller {
  credentials: CredentialSource;
  auth: AuthOptions;
  onKey?: (key: ResolvedKey) => void;
}

/**
 * Steps 1-3 of every ingest route (size → key → rate limit and quota), on
 * any transport: key and limits need only the headers (gRPC: the metadata),
 * so they run before the body is read.
 */
export async function admit(caller: Caller, deps: IngestDeps): Promise<{ key: ResolvedKey; now: number }> {
  if (deps.isDraining()) throw new DrainingError();
  const refusal = deps.refusal?.();
  if (refusal !== undefined) throw new ServiceUnavailableError(refusal, 5);

  // 1. Size, by the declared length (a chunked body, or a gRPC message, is counted while read).
  checkDeclaredLength(caller.credentials.headers, deps.maxBodyBytes);

  // 2. Key, with the ingest scope.
  const key = await deps.auth.authenticate(caller.credentials, 'ingest', caller.auth);
  caller.onKey?.(key);

  // 3. Per-key rate limit, then the org's monthly quota.
  const now = Date.now();
  await deps.limiter.consume(key.keyId, key.rateLimitRps);
  await deps.quota.check(key.orgId, key.monthlySpans, now);
  return { key, now };
}

/**
 * An HTTP request as the caller of `admit`: POST /ingest answers a key
 * without the ingest scope with 401, as the contract says (403 elsewhere);
 * the request's log line names the key (its prefix, never the key) and org.
 */
export function httpCaller(req: Request, res: Response): Caller {
  return {
    credentials: req,
    auth: { client: req.ip, listener: 'ingest', forbiddenStatus: req.path === '/ingest' ? 401 : 403 },
    onKey: (key) => {
      res.locals.keyPrefix = key.prefix;
      res.locals.orgId = key.orgId;
    },
  };
}

/** After the write log holds a batch: wake the flusher, count it against the quota, record the metrics. */
export async function accepted(deps: IngestDeps, key: ResolvedKey, batch: EncodedBatch, now: number, started: number, status: string): Promise<void> {
  deps.flusher.notify();
  // The batch will be stored: from here on the answer is a success, which waits for the count only briefly (owed, then added).
  await deps.quota.add(key.orgId, [{ id: batch.fingerprint, spans: batch.rows }], now);

  deps.metrics.spansAccepted.inc(batch.rows);
  if ((batch.before2001 ?? 0) > 0) deps.metrics.spansBefore2001.inc(batch.before2001);
  if (batch.unpriced.length > 0) {
    deps.metrics.spansUnpriced.inc(batch.unpriced.length);
    for (const sp of batch.unpriced) deps.metrics.countUnpriced(sp.provider ?? '', sp.modelId ?? '');
  }
  deps.metrics.requestDuration.observe((performance.now() - started) / 1000);
  deps.metrics.requests.inc({ status, code: '' });
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The id of a request's log line: the caller's `x-request-id` when it is a plain token, else a new one. */
export function requestId(given: unknown): string {
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/** The log line of a failure that is ours (5xx), on any route and transport; the caller's own (4xx) are in its request line. */
export function logFailure(logger: Logger, e: TiError, err: unknown, reqId: string): void {
  // A client gone before its body arrived gets no answer and is no fault of ours.
  if (e.code === 'TI_ERR_ABORTED') logger.info({ reqId, code: e.code }, 'the client closed the connection before its body arrived');
  // Expected refusals (503) at warn, once per change of reason; faults (500) with their stack.
  else if (e.httpCode === 503) refusalLogOf(logger).refused(e, err instanceof TiError ? err.cause : err, reqId);
  else if (e.httpCode >= 500) logger.error({ reqId, code: e.code, err: err instanceof TiError ? (err.cause ?? err) : err }, e.message);
}

/** A batch refused on any ingest route or transport: the refusal metrics, by the catalog's status and reason. */
export function refused(metrics: Metrics, e: TiError): void {
  if (e.code === 'TI_ERR_BUFFER_FULL') metrics.bufferFull.inc();
  metrics.requests.inc({ status: String(e.httpCode), code: e.code });
  metrics.batchesRejected.inc({ reason: refusalReason(e.code) });
}

/** Below this declared size a body is received without a slot. */
export const SMALL_BODY_BYTES = 1024 * 1024;

export const noop = (): void => undefined;

/**
 * The body of an ingest request, inflated, and the release of the memory
 * slot it holds (call it once the write log has the batch). A slot bounds the
 * bodies in memory at once (bytes, parsed objects, encoded rows); it is taken
 * only where memory grows large: a large or chunked body while it arrives
 * (and a sender too slow to fill it is cut off: `minBodyBytesPerSec`); a small
 * compressed body only once it has arrived, for its inflation, from a pool of
 * its own (so at most twice MAX_CONCURRENT_BODIES bodies are large in memory).
 * Small plain bodies take none, so slow large uploads stall no small batch.
 */
export async function receive(req: Request, deps: IngestDeps): Promise<{ body: Buffer; release: () => void }> {
  const declared = Number(req.headers['content-length']);
  const small = Number.isFinite(declared) && declared <= SMALL_BODY_BYTES;
  if (small && !isCompressed(req)) return { body: await readBody(req, deps.maxBodyBytes), release: noop };
  const raw = small ? await receiveBody(req, deps.maxBodyBytes) : undefined;
  const release = await (small ? (deps.inflateSlots ?? deps.slots) : deps.slots).acquire();
  try {
    const received = raw ?? (await receiveBody(req, deps.maxBodyBytes, { minBytesPerSec: deps.minBodyBytesPerSec }));
    return { body: await decodeBody(req, received, deps.maxBodyBytes), release };
  } catch (e) {
    release();
    throw e;
  }
}

/**
 * 2001-01-01T00:00:00Z. The contract takes any epoch-ms time, but a start this
 * early is nearly always seconds sent as milliseconds (1767225600 is January
 * 1970 as ms): still stored (the 202 stands), and counted so it can be found.
 */
export const SECONDS_SUSPECT_BEFORE_MS = 978_307_200_000;

export interface EncodedBatch {
  /** Canonical NDJSON lines, one per span. */
  lines: Buffer;
  rows: number;
  unpriced: Span[];
  /** Spans that start before 2001: seconds sent as milliseconds? */
  before2001?: number;
  /** What makes it "the same batch" for the quota (see batchFingerprint). */
  fingerprint: string;
}

/**
 * "The same batch", for charging it once: the org and the set of (trace id,
 * span id) pairs of its spans, whatever their order, body or transport. A
 * client's retry of a batch (the SDK resends the same spans) is the same
 * batch; any batch with one span more or less is another. The spans table
 * keeps one row per (org, trace, span) either way.
 */
export function batchFingerprint(orgId: string, ids: readonly string[]): string {
  const h = createHash('sha256').update(orgId).update('\u0000');
  for (const id of [...ids].sort()) h.update(id).update('\n');
  return h.digest('hex');
}

/** Steps 5-6 of every ingest route: price each span of valid traces and encode its row. */
export async function encodeTraces(traces: readonly Trace[], deps: IngestDeps, key: ResolvedKey, now: number): Promise<EncodedBatch> {
  await deps.pricing.refresh();
  const ctx = { orgId: key.orgId, keyPrefix: key.prefix, receivedAt: now };
  const lines: string[] = [];
  const unpriced: Span[] = [];
  let before2001 = 0;
  const policy = compiledPolicyFor(key.contentPolicy);
  // A span already past its org's text retention is written without texts: the retention pass would only empty them again.
  const textDays = key.textDays ?? deps.textRetentionDays ?? 0;
  const textsBefore = textDays > 0 ? retentionCuts(now, { days: 0, textDays }).textsBefore : undefined;
  let kept = 0;
  const ids: string[] = [];
  for (const sent of traces) {
    const trace = policy.apply(sent);
    if (policy.active) kept += trace.spans.length;
    const head = encodeTraceHead(trace, ctx);
    for (const span of trace.spans) {
      ids.push(`${trace.traceId}\u0000${span.spanId}`);
      const costs = deps.pricing.price(span, key.orgId);
      if (isUnpriced(costs.priced, span.modelId ?? '')) unpriced.push(span);
      if (span.startTime < SECONDS_SUSPECT_BEFORE_MS) before2001++;
      lines.push(encodeSpanLine(head, textsBefore !== undefined && span.startTime < textsBefore ? withoutTexts(span) : span, costs));
    }
  }
  if (kept > 0) deps.metrics.contentRedacted.inc(kept);
  return { lines: toNdjson(lines), rows: lines.length, unpriced, before2001, fingerprint: batchFingerprint(key.orgId, ids) };
}

function withoutTexts(span: Span): Span {
  const { input: _i, output: _o, toolCatalog: _t, sources: _s, safetyMetadata: _m, ...rest } = span;
  return rest;
}

/**
 * The lines as UTF-8, each ending in a newline, written straight into one
 * buffer of the exact size: joining them first would copy every text once more.
 */
export function toNdjson(lines: readonly string[]): Buffer {
  let size = lines.length;
  for (const line of lines) size += Buffer.byteLength(line, 'utf8');
  const buf = Buffer.allocUnsafe(size);
  let at = 0;
  for (const line of lines) {
    at += buf.write(line, at, 'utf8');
    buf[at++] = 0x0a;
  }
  return buf;
}
