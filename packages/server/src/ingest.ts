import type { Request, Response } from 'express';
import { InvalidJsonError, ValidationError } from '@trace-ingest/shared/errors';
import { validateIngest } from '@trace-ingest/shared/validate';
import type { ResolvedKey } from '@trace-ingest/store/control-store-types';
import { checkContentType } from './body.js';
import { exceedsDepth, MAX_JSON_DEPTH } from './json-depth.js';
import { accepted, admit, encodeTraces, httpCaller, receive, type EncodedBatch, type IngestDeps } from './pipeline.js';

/**
 * POST /ingest, in the order of checks of the v1 contract:
 * size → key → rate limit and quota → validation → pricing → buffer.
 * Key and limits need only headers, so they run before the body is read:
 * a client without a valid key never makes the server read its body.
 */
export function ingestHandler(deps: IngestDeps) {
  return async (req: Request, res: Response): Promise<void> => {
    const started = performance.now();
    const { key, now } = await admit(httpCaller(req, res), deps);

    // 4. Read, parse and validate; 5. price; 6. buffer. The memory slot (see
    // `receive`) covers the body's life until the write log holds it.
    checkContentType(req);
    const { body, release } = await receive(req, deps);
    let batch: EncodedBatch;
    try {
      batch = await encodeBody(body, deps, key, now);
      // Append to the write log (fsync'd, group commit).
      await deps.log.append(batch.lines, batch.rows);
    } finally {
      release();
    }
    await accepted(deps, key, batch, now, started, '202');
    res.status(202).json({ accepted: batch.rows });
  };
}

async function encodeBody(body: Buffer, deps: IngestDeps, key: ResolvedKey, now: number): Promise<EncodedBatch> {
  const result = validateIngest(parseJson(body));
  if (!result.ok) throw new ValidationError(result.issues);
  return encodeTraces(result.value.traces, deps, key, now);
}

/**
 * Bytes to a value. Nesting no v1 payload can have is refused before
 * JSON.parse, which would build millions of nested arrays out of a few MB of
 * `[`. The bytes and their text are garbage once this returns, before the
 * rows are built.
 */
function parseJson(body: Buffer): unknown {
  if (exceedsDepth(body, MAX_JSON_DEPTH)) {
    throw new ValidationError([
      { path: '(root)', message: `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels; a v1 payload is far shallower`, code: 'depth' },
    ]);
  }
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (e) {
    throw new InvalidJsonError(e instanceof Error ? e.message : 'parse error');
  }
}
