import type { Logger } from 'pino';
import type { TiError } from '@trace-ingest/shared/errors';

/** After this long without a refusal for a reason, the next one is a new state and is logged again. */
export const REFUSAL_QUIET_MS = 60_000;

/**
 * Expected refusals (503: draining, the disk reserve, a store or Redis down,
 * the write log full or unwritable) as an operator reads them: one warn line,
 * without a stack, when the reason changes, not one per answer; each answer
 * is counted in trace_ingest_requests_total by status and code.
 */
export class RefusalLog {
  private reason: string | undefined;
  private lastAt = 0;
  private since = 0;

  constructor(
    private readonly logger: Logger,
    private readonly now: () => number = () => performance.now(),
  ) {}

  refused(e: TiError, cause: unknown, reqId: string): void {
    // Figures in a reason (free MiB, a percentage) change from answer to answer within one state.
    const reason = `${e.code} ${e.message.replace(/\d+/g, '#')}`;
    const at = this.now();
    const same = reason === this.reason && at - this.lastAt < REFUSAL_QUIET_MS;
    this.lastAt = at;
    if (same) {
      this.since++;
      return;
    }
    const before = this.reason === undefined ? undefined : { reason: this.reason, refusedSince: this.since };
    this.reason = reason;
    this.since = 1;
    const why = cause === undefined || cause === e ? undefined : cause instanceof Error ? cause.message : String(cause);
    this.logger.warn(
      { reqId, code: e.code, status: e.httpCode, ...(why === undefined ? {} : { cause: why }), ...(before === undefined ? {} : { previous: before }) },
      `refusing batches: ${e.message} (logged once per change of reason; counted in trace_ingest_requests_total)`,
    );
  }
}

const logs = new WeakMap<Logger, RefusalLog>();

/** The refusal log of a logger: every listener of a server (HTTP, OTLP/HTTP, gRPC) shares its server's. */
export function refusalLogOf(logger: Logger): RefusalLog {
  let r = logs.get(logger);
  if (r === undefined) {
    r = new RefusalLog(logger);
    logs.set(logger, r);
  }
  return r;
}
