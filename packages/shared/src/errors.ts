import type { ValidationIssue } from './schema.js';

/** The google.rpc.Code values OTLP answers carry. */
export const GRPC = {
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/**
 * Every code the service answers with, in one place: the status(es) it goes
 * out with, where it can be met (`ingest`: the public HTTP listener, listed
 * in the README and the OpenAPI document; `console`: the cost console's
 * listener only; `admin`: the CLI's Unix socket;
 * `cli`: the CLI and its stores; `start`: configuration refused at start),
 * and, for a refused POST /ingest batch, the bounded `reason` label of
 * trace_ingest_batches_rejected_total (others count as `error`).
 */
const CATALOG = {
  TI_ERR_PAYLOAD_TOO_LARGE: { status: [413], surface: 'ingest', reason: 'size', otlp: [413, GRPC.INVALID_ARGUMENT] },
  TI_ERR_UNAUTHORIZED: { status: [401], surface: 'ingest', reason: 'auth', otlp: [401, GRPC.UNAUTHENTICATED] },
  /**
   * A valid key without the scope the route needs. 401 on POST /ingest, whose contract answers 401 for a key it
   * does not take; 403 elsewhere (PERMISSION_DENIED on OTLP, which exporters do not retry).
   */
  TI_ERR_FORBIDDEN: { status: [403, 401], surface: 'ingest', reason: 'auth', otlp: [403, GRPC.PERMISSION_DENIED], ingest: [401] },
  /** Two Authorization headers, two x-api-key headers, or both carrying different credentials: refused, never resolved by precedence. */
  TI_ERR_AMBIGUOUS_CREDENTIALS: { status: [400], surface: 'ingest', reason: 'auth', otlp: [400, GRPC.INVALID_ARGUMENT] },
  /** Too many failed authentications from one client address: refused before the credential is looked at, until Retry-After. */
  TI_ERR_AUTH_LIMITED: { status: [429], surface: 'ingest', reason: 'auth', otlp: [429, GRPC.RESOURCE_EXHAUSTED] },
  TI_ERR_RATE_LIMITED: { status: [429], surface: 'ingest', reason: 'rate_limit', otlp: [429, GRPC.RESOURCE_EXHAUSTED] },
  /** On /v1/traces 403, not 429: every OTLP exporter retries a 429, and the quota will not come back within its retries. */
  TI_ERR_QUOTA_EXCEEDED: { status: [429], surface: 'ingest', reason: 'quota', otlp: [403, GRPC.RESOURCE_EXHAUSTED] },
  TI_ERR_INVALID_JSON: { status: [400], surface: 'ingest', reason: 'validation', otlp: [400, GRPC.INVALID_ARGUMENT] },
  TI_ERR_VALIDATION: { status: [400], surface: 'ingest', reason: 'validation', otlp: [400, GRPC.INVALID_ARGUMENT] },
  /** POST /v1/traces: a body that is not an OTLP ExportTraceServiceRequest. */
  TI_ERR_INVALID_OTLP: { status: [400], surface: 'ingest', reason: 'validation', otlp: [400, GRPC.INVALID_ARGUMENT] },
  /** On /v1/traces 415, as the OTLP/HTTP specification asks for an unsupported Content-Type. */
  TI_ERR_CONTENT_TYPE: { status: [400], surface: 'ingest', reason: 'validation', otlp: [415, GRPC.INVALID_ARGUMENT] },
  TI_ERR_CONTENT_ENCODING: { status: [400], surface: 'ingest', reason: 'validation', otlp: [400, GRPC.INVALID_ARGUMENT] },
  TI_ERR_BODY_SIZE: { status: [400], surface: 'ingest', reason: 'validation', otlp: [400, GRPC.INVALID_ARGUMENT] },
  TI_ERR_ABORTED: { status: [400], surface: 'ingest', reason: 'aborted', otlp: [400, GRPC.INVALID_ARGUMENT] },
  TI_ERR_DRAINING: { status: [503], surface: 'ingest', reason: 'draining', otlp: [503, GRPC.UNAVAILABLE] },
  TI_ERR_BUFFER_FULL: { status: [503], surface: 'ingest', reason: 'buffer_full', otlp: [503, GRPC.UNAVAILABLE] },
  TI_ERR_UNAVAILABLE: { status: [503], surface: 'ingest', otlp: [503, GRPC.UNAVAILABLE] },
  TI_ERR_INTERNAL: { status: [500], surface: 'ingest', otlp: [500, GRPC.INTERNAL] },
  TI_ERR_NOT_FOUND: { status: [404], surface: 'ingest', otlp: [404, GRPC.NOT_FOUND] },
  TI_ERR_METHOD_NOT_ALLOWED: { status: [405], surface: 'ingest', otlp: [405, GRPC.UNIMPLEMENTED] },
  /** A request Express refused before a handler ran (a malformed URL). */
  TI_ERR_BAD_REQUEST: { status: [400], surface: 'ingest', otlp: [400, GRPC.INVALID_ARGUMENT] },
  /** A request Node's HTTP parser refused: malformed, headers too large, too slow. */
  TI_ERR_BAD_HTTP: { status: [400, 408, 431], surface: 'ingest', otlp: [400, GRPC.INVALID_ARGUMENT] },
  /** The console answered a Host it does not serve (CONSOLE_ALLOWED_HOSTS): a rebound DNS name or a misdirected request. */
  TI_ERR_HOST_NOT_ALLOWED: { status: [421], surface: 'console' },
  TI_ERR_ADMIN_REQUEST: { status: [400], surface: 'admin' },
  TI_ERR_READ_ONLY: { status: [400], surface: 'admin' },
  TI_ERR_QUERY: { status: [400], surface: 'admin' },
  TI_ERR_USAGE: { status: [400], surface: 'cli' },
  TI_ERR_CONFLICT: { status: [409], surface: 'cli' },
  TI_ERR_CONFIG: { status: [500], surface: 'start' },
} as const satisfies Record<string, ErrorCodeInfo>;

export interface ErrorCodeInfo {
  /** The statuses it goes out with; the first is the one unless the condition names another of them. */
  status: readonly number[];
  surface: 'ingest' | 'console' | 'admin' | 'cli' | 'start';
  reason?: string;
  /** How POST /v1/traces answers it: the HTTP status (what an OTLP exporter retries on) and the google.rpc.Code of the Status body. */
  otlp?: readonly [number, number];
  /** The statuses POST /ingest answers it with, where the v1 contract narrows `status`. */
  ingest?: readonly number[];
}

export type ErrorCode = keyof typeof CATALOG;
export const ERROR_CODES: Readonly<Record<ErrorCode, ErrorCodeInfo>> = CATALOG;

/** The reason label of a refused batch. */
export function refusalReason(code: ErrorCode): string {
  return ERROR_CODES[code].reason ?? 'error';
}

/** How POST /v1/traces answers an error: its HTTP status and google.rpc.Code, from the catalog. */
export function otlpAnswer(e: TiError): { http: number; grpc: number } {
  const otlp = ERROR_CODES[e.code].otlp;
  if (otlp !== undefined) return { http: otlp[0], grpc: otlp[1] };
  return { http: e.httpCode, grpc: e.httpCode >= 500 ? GRPC.INTERNAL : GRPC.INVALID_ARGUMENT };
}

/**
 * How OTLP/gRPC answers an error. What OTLP/HTTP exporters retry (429, 502,
 * 503, 504) is UNAVAILABLE, which gRPC exporters retry, with the
 * `Retry-After` delay as the status's RetryInfo detail (the specification's
 * throttling answer); everything else keeps the Status code of POST
 * /v1/traces, so a used-up quota (403 there) stays RESOURCE_EXHAUSTED without
 * RetryInfo, final by the OTLP specification.
 */
export function otlpGrpcAnswer(e: TiError): { code: number; retryDelaySeconds?: number } {
  const { http, grpc } = otlpAnswer(e);
  if (![429, 502, 503, 504].includes(http)) return { code: grpc };
  const after = Number(e.headers['Retry-After']);
  return Number.isFinite(after) && after > 0 ? { code: GRPC.UNAVAILABLE, retryDelaySeconds: after } : { code: GRPC.UNAVAILABLE };
}

export interface TiErrorOptions {
  cause?: unknown;
  headers?: Record<string, string>;
  /** One of the code's catalogued statuses other than its first (e.g. 408 for a slow client). */
  status?: number;
}

/**
 * The one base class of every error the service answers with. A handler
 * throws; a single error middleware turns it into the HTTP answer. The
 * status comes from the code's entry in the catalog above, so the mapping
 * from condition to status lives there and nowhere else.
 */
export class TiError extends Error {
  readonly httpCode: number;
  readonly code: ErrorCode;
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string, options?: TiErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    const statuses = ERROR_CODES[code].status;
    const status = options?.status ?? statuses[0] ?? 500;
    if (!statuses.includes(status)) throw new Error(`${code} is catalogued with ${statuses.join(', ')}, not ${status}`);
    this.name = new.target.name;
    this.httpCode = status;
    this.code = code;
    this.headers = options?.headers ?? {};
  }

  /** The JSON body sent to the caller. Never includes the cause. */
  toBody(): Record<string, unknown> {
    return { error: this.message, code: this.code };
  }
}

export class PayloadTooLargeError extends TiError {
  constructor(limitBytes: number) {
    super('TI_ERR_PAYLOAD_TOO_LARGE', `request body exceeds the limit of ${limitBytes} bytes (INGEST_MAX_BODY_BYTES); send smaller batches`);
  }
}

export class UnauthorizedError extends TiError {
  constructor(message = 'missing, invalid or revoked API key: send it as "Authorization: Bearer <key>" or "x-api-key: <key>"') {
    super('TI_ERR_UNAUTHORIZED', message);
  }
}

/** A valid key (or token) without the scope a route needs; the message names the scope. */
export class ForbiddenError extends TiError {
  constructor(
    readonly scope: string,
    message = `this API key lacks the "${scope}" scope; create a key with "trace-ingest keys create --org <org> --scope ${scope}"`,
    options?: { status?: 401 | 403 },
  ) {
    super('TI_ERR_FORBIDDEN', message, options);
  }
}

/** A request that carries its credential twice (two headers, or both forms with different values). */
export class AmbiguousCredentialsError extends TiError {
  constructor(message: string) {
    super('TI_ERR_AMBIGUOUS_CREDENTIALS', message);
  }
}

/** Failed authentications from one address over the limit: the next attempts are refused for a while. */
export class AuthLimitedError extends TiError {
  constructor(retryAfterSeconds: number) {
    const s = Math.max(1, Math.ceil(retryAfterSeconds));
    super('TI_ERR_AUTH_LIMITED', `too many failed authentications from this address; retry after ${s} s with a valid credential`, {
      headers: { 'Retry-After': String(s) },
    });
  }
}

/** The console refuses a Host header it does not serve (DNS rebinding, a misdirected request). */
export class HostNotAllowedError extends TiError {
  constructor(host: string) {
    super(
      'TI_ERR_HOST_NOT_ALLOWED',
      `the console does not serve the host "${host.slice(0, 100)}"; open it by an allowed name, or add this one to CONSOLE_ALLOWED_HOSTS`,
    );
  }
}

export class RateLimitedError extends TiError {
  readonly retryAfterSeconds: number;
  constructor(retryAfterSeconds: number, limitRps: number) {
    const s = Math.max(1, Math.ceil(retryAfterSeconds));
    super('TI_ERR_RATE_LIMITED', `rate limit of ${limitRps} requests per second for this API key exceeded; retry after ${s} s`, {
      headers: { 'Retry-After': String(s) },
    });
    this.retryAfterSeconds = s;
  }
}

export class QuotaExceededError extends TiError {
  constructor(monthlySpans: number) {
    super('TI_ERR_QUOTA_EXCEEDED', `monthly span quota of ${monthlySpans} spans is exceeded for this organization; upgrade the plan to send more this month`);
  }
}

export class InvalidJsonError extends TiError {
  constructor(detail: string) {
    super('TI_ERR_INVALID_JSON', `request body is not valid JSON: ${detail}`);
  }
}

export class ValidationError extends TiError {
  readonly issues: ValidationIssue[];
  constructor(issues: ValidationIssue[]) {
    const first = issues[0];
    const summary = first === undefined ? 'payload does not match the v1 schema' : `${first.path}: ${first.message}`;
    super('TI_ERR_VALIDATION', `payload failed validation (${issues.length} issue${issues.length === 1 ? '' : 's'}); first: ${summary}`);
    this.issues = issues;
  }
  override toBody(): Record<string, unknown> {
    return { ...super.toBody(), issues: this.issues };
  }
}

export class BadRequestError extends TiError {
  constructor(code: ErrorCode, message: string) {
    super(code, message);
  }
}

export class NotFoundError extends TiError {
  constructor(message: string) {
    super('TI_ERR_NOT_FOUND', message);
  }
}

export class MethodNotAllowedError extends TiError {
  constructor(method: string, path: string, allowed: readonly string[]) {
    super('TI_ERR_METHOD_NOT_ALLOWED', `${method} is not allowed on ${path}; use ${allowed.join(', ')}`, {
      headers: { Allow: allowed.join(', ') },
    });
  }
}

export class DrainingError extends TiError {
  constructor() {
    super('TI_ERR_DRAINING', 'server is shutting down and accepts no new batches; retry against another replica or after restart', {
      headers: { 'Retry-After': '1' },
    });
  }
}

export class BufferFullError extends TiError {
  constructor(retryAfterSeconds: number) {
    super('TI_ERR_BUFFER_FULL', 'write buffer is full while the span store catches up; retry later', {
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) },
    });
  }
}

export class ServiceUnavailableError extends TiError {
  constructor(message: string, retryAfterSeconds = 1, cause?: unknown) {
    super('TI_ERR_UNAVAILABLE', message, { cause, headers: { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) } });
  }
}

export class InternalError extends TiError {
  /** `batch`: the answer to a batch of spans, which the caller must send again; otherwise a read or an admin request. */
  constructor(cause?: unknown, what: 'batch' | 'request' = 'batch') {
    super(
      'TI_ERR_INTERNAL',
      what === 'batch'
        ? 'internal error; the batch was not accepted, retry it'
        : "internal error; the request failed in the server, retry it (the server's log has the cause)",
      { cause },
    );
  }
}

/** Bad configuration: the process cannot start. The message names the variable. */
export class ConfigError extends TiError {
  constructor(message: string) {
    super('TI_ERR_CONFIG', message);
  }
}

/** A CLI or admin request names something that does not exist or conflicts. */
export class UsageError extends TiError {
  constructor(message: string, code: ErrorCode = 'TI_ERR_USAGE') {
    super(code, message);
  }
}

export class ConflictError extends TiError {
  constructor(message: string) {
    super('TI_ERR_CONFLICT', message);
  }
}

export function isTiError(e: unknown): e is TiError {
  return e instanceof TiError;
}
