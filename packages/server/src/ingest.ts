import type { Request, Response } from 'express';
import type { Logger } from 'pino';
import { DrainingError, InvalidJsonError, ValidationError } from '@trace-ingest/shared/errors';
import { encodeRow, spanToRow, type SpanPricer } from '@trace-ingest/shared/rows';
import type { Span } from '@trace-ingest/shared/schema';
import { validateIngest } from '@trace-ingest/shared/validate';
import type { Authenticator } from './auth.js';
import { checkContentType, checkDeclaredLength, readBody, type BodySlots } from './body.js';
import type { Flusher } from './flusher.js';
import type { Metrics } from './metrics.js';
import type { QuotaCounter } from './quota.js';
import type { RateLimiter } from './rate-limit.js';
import type { WriteLog } from './write-log.js';

/** Prices spans; `refresh` picks up override changes before each batch. */
export interface Pricing {
  refresh(): Promise<void>;
  readonly price: SpanPricer;
}

export interface IngestDeps {
  maxBodyBytes: number;
  auth: Authenticator;
  limiter: RateLimiter;
  quota: QuotaCounter;
  pricing: Pricing;
  log: WriteLog;
  flusher: Flusher;
  slots: BodySlots;
  metrics: Metrics;
  logger: Logger;
  isDraining: () => boolean;
}

/**
 * POST /ingest, in the order of checks of the v1 contract:
 * size → key → rate limit and quota → validation → pricing → buffer.
 * Key and limits need only headers, so they run before the body is read:
 * a client without a valid key never makes the server read its body.
 */
export function ingestHandler(deps: IngestDeps) {
  return async (req: Request, res: Response): Promise<void> => {
    const started = performance.now();
    if (deps.isDraining()) throw new DrainingError();

    // 1. Size, by the declared length (a chunked body is counted while read).
    checkDeclaredLength(req, deps.maxBodyBytes);

    // 2. Key.
    const key = await deps.auth.authenticate(req.headers);
    res.locals.keyPrefix = key.prefix;
    res.locals.orgId = key.orgId;

    // 3. Per-key rate limit, then the org's monthly quota.
    const now = Date.now();
    await deps.limiter.consume(key.keyId, key.rateLimitRps);
    await deps.quota.check(key.orgId, key.monthlySpans, now);

    // 4. Read, parse and validate.
    checkContentType(req);
    const release = await deps.slots.acquire();
    let body: Buffer;
    try {
      body = await readBody(req, deps.maxBodyBytes);
    } finally {
      release();
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch (e) {
      throw new InvalidJsonError(e instanceof Error ? e.message : 'parse error');
    }
    const result = validateIngest(parsed);
    if (!result.ok) throw new ValidationError(result.issues);
    const payload = result.value;

    // 5. Price each span, 6. encode the rows and append them to the write log.
    await deps.pricing.refresh();
    const ctx = { orgId: key.orgId, keyPrefix: key.prefix, receivedAt: now };
    const lines: string[] = [];
    const unpriced: Span[] = [];
    for (const trace of payload.traces) {
      for (const span of trace.spans) {
        const costs = deps.pricing.price(span, key.orgId);
        if (!costs.priced && span.modelId !== undefined) unpriced.push(span);
        lines.push(encodeRow(spanToRow(trace, span, ctx, costs)));
      }
    }
    lines.push('');
    const rows = lines.length - 1;
    await deps.log.append(Buffer.from(lines.join('\n'), 'utf8'), rows);
    deps.flusher.notify();
    await deps.quota.add(key.orgId, rows, now);

    deps.metrics.spansAccepted.inc(rows);
    if (unpriced.length > 0) {
      deps.metrics.spansUnpriced.inc(unpriced.length);
      for (const sp of unpriced) deps.metrics.countUnpriced(sp.provider ?? '', sp.modelId ?? '');
    }
    deps.metrics.requestDuration.observe((performance.now() - started) / 1000);
    deps.metrics.requests.inc({ status: '202', code: '' });
    res.status(202).json({ accepted: rows });
  };
}
