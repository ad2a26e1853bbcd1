import type { Request, Response } from 'express';
import { ValidationError } from '@trace-ingest/shared/errors';
import { mapExportRequest, type MappedTraces, type OtlpMappingOptions } from '@trace-ingest/shared/otlp-genai';
import type { Trace } from '@trace-ingest/shared/schema';
import { validateIngest } from '@trace-ingest/shared/validate';
import type { ResolvedKey } from '@trace-ingest/store/control-store-types';
import { accepted, admit, encodeTraces, httpCaller, receive, type EncodedBatch, type IngestDeps } from './pipeline.js';
import { requestFormat, UnsupportedMediaTypeError, type OtlpCodec, type OtlpFormat } from './otlp-codec.js';

export interface OtlpDeps extends IngestDeps {
  otlp: { codec: OtlpCodec; mapping: OtlpMappingOptions };
}

/**
 * POST /v1/traces (OTLP/HTTP), in the order of checks of /ingest:
 * size → key → rate limit and quota → decode → map → price → write log.
 * The 200 is sent once the fsync'd write log holds the batch, as /ingest's
 * 202 is; the rows go to the same spans table, deduplicated the same way.
 */
export function otlpTracesHandler(deps: OtlpDeps) {
  const { codec } = deps.otlp;
  return async (req: Request, res: Response): Promise<void> => {
    const started = performance.now();
    const { key, now } = await admit(httpCaller(req, res), deps);

    const ct = req.headers['content-type'];
    const format = requestFormat(ct);
    if (format === undefined) throw new UnsupportedMediaTypeError((ct ?? '').split(';')[0]?.trim() ?? '');

    const { rejected, message } = await storeOtlp(await receive(req, deps), format, deps, key, now, started, '200');
    send(res, format, 200, codec.encodeResponse(format, rejected, message));
  };
}

/** What an ExportTraceServiceResponse says: the spans rejected (partial_success) and why. */
export interface OtlpOutcome {
  rejected: number;
  message: string;
}

/**
 * The OTLP steps after admission, the same on every transport (OTLP/HTTP and
 * OTLP/gRPC): decode → map → validate → price → write log (fsync'd) →
 * counted as accepted. `received.release` frees the body's memory slot once
 * the write log holds the batch. Resolves only once the batch is durable.
 */
export async function storeOtlp(
  received: { body: Buffer; release: () => void },
  format: OtlpFormat,
  deps: OtlpDeps,
  key: ResolvedKey,
  now: number,
  started: number,
  status: string,
): Promise<OtlpOutcome> {
  let mapped: MappedTraces;
  let batch: EncodedBatch;
  try {
    const decoded = deps.otlp.codec.decodeRequest(received.body, format);
    mapped = mapExportRequest(decoded, deps.otlp.mapping);
    const traces = validTraces(mapped);
    batch = await encodeTraces(traces, deps, key, now);
    if (batch.rows > 0) await deps.log.append(batch.lines, batch.rows);
  } finally {
    received.release();
  }
  if (batch.rows > 0) await accepted(deps, key, batch, now, started, status);
  else deps.metrics.requests.inc({ status, code: '' });
  const message = mapped.rejected > 0 ? `${mapped.rejected} span${mapped.rejected === 1 ? '' : 's'} rejected; ${mapped.rejectReasons.join('; ')}` : '';
  return { rejected: mapped.rejected, message };
}

/**
 * The mapping builds spans within the v1 limits; the v1 validator still has
 * the last word, so nothing is written that /ingest would refuse. A trace
 * it refuses is retried span by span and only the failing spans are
 * rejected (counted in `partial_success`).
 */
function validTraces(mapped: MappedTraces): Trace[] {
  const out: Trace[] = [];
  for (let i = 0; i < mapped.traces.length; i += 1000) {
    const chunk = mapped.traces.slice(i, i + 1000);
    if (chunk.length === 0) continue;
    if (validateIngest({ version: 'v1', traces: chunk }).ok) {
      out.push(...chunk);
      continue;
    }
    for (const trace of chunk) {
      const kept = trace.spans.filter((span) => {
        const r = validateIngest({ version: 'v1', traces: [{ ...trace, spans: [span] }] });
        if (r.ok) return true;
        mapped.rejected++;
        mapped.spans--;
        if (mapped.rejectReasons.length < 5)
          mapped.rejectReasons.push(`span ${span.spanId} of trace ${trace.traceId}: ${new ValidationError(r.issues).message}`);
        return false;
      });
      if (kept.length > 0) out.push({ ...trace, spans: kept });
    }
  }
  return out;
}

function send(res: Response, format: OtlpFormat, status: number, body: Buffer | string): void {
  res
    .status(status)
    .type(format === 'json' ? 'application/json' : 'application/x-protobuf')
    .send(body);
}
