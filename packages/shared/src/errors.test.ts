import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import * as errors from './errors.js';
import { ERROR_CODES, GRPC, otlpAnswer, otlpGrpcAnswer, type ErrorCode, TiError, refusalReason } from './errors.js';
import { buildOpenApiDocument, publicErrorCodes } from './openapi.js';

const README = fs.readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');

/** The rows of the README's "Errors and how a client should react" table: statuses and codes of each. */
function readmeRows(): { statuses: number[]; codes: string[] }[] {
  const section = README.slice(README.indexOf('## Errors and how a client should react'));
  const table = section.slice(0, section.indexOf('\n## '));
  return table
    .split('\n')
    .filter((l) => /^\| \d/.test(l))
    .map((l) => {
      const [status = '', codes = ''] = l.split('|').slice(1);
      return { statuses: (status.match(/\d{3}/g) ?? []).map(Number), codes: codes.match(/TI_ERR_[A-Z_]+/g) ?? [] };
    });
}

describe('error code catalog', () => {
  it('lists every public code in the README table, with its statuses, and nothing else', () => {
    const rows = readmeRows();
    expect(rows.length).toBeGreaterThan(5);
    const inReadme = rows.flatMap((r) => r.codes);
    expect([...new Set(inReadme)].sort()).toEqual(publicErrorCodes().sort());
    for (const code of publicErrorCodes()) {
      const statuses = rows.filter((r) => r.codes.includes(code)).flatMap((r) => r.statuses);
      for (const s of ERROR_CODES[code].status) expect(statuses, `${code} answers ${s}`).toContain(s);
    }
  });

  it('gives the OpenAPI document the public codes, and a response for each status a refused batch gets', () => {
    const doc = buildOpenApiDocument() as {
      paths: Record<string, { post?: { responses: Record<string, unknown> } }>;
      components: { schemas: { Error: { properties: { code: { 'x-codes': Record<string, number[]> } } } } };
    };
    const documented = doc.components.schemas.Error.properties.code['x-codes'];
    expect(Object.keys(documented).sort()).toEqual(publicErrorCodes().sort());
    for (const code of publicErrorCodes()) expect(documented[code]).toEqual(ERROR_CODES[code].status);
    const ingestResponses = Object.keys(doc.paths['/ingest']?.post?.responses ?? {});
    const refusals = publicErrorCodes().filter((c) => refusalReason(c) !== 'error' || c === 'TI_ERR_UNAVAILABLE' || c === 'TI_ERR_INTERNAL');
    for (const code of refusals)
      for (const s of ERROR_CODES[code].ingest ?? ERROR_CODES[code].status) expect(ingestResponses, `${code} answers ${s}`).toContain(String(s));
  });

  it('keeps the refusal reasons a small label set', () => {
    const reasons = new Set((Object.keys(ERROR_CODES) as ErrorCode[]).map(refusalReason));
    expect([...reasons].sort()).toEqual(['aborted', 'auth', 'buffer_full', 'draining', 'error', 'quota', 'rate_limit', 'size', 'validation']);
    expect(refusalReason('TI_ERR_VALIDATION')).toBe('validation');
    expect(refusalReason('TI_ERR_INTERNAL')).toBe('error');
  });

  it('builds every error class with the status its code is catalogued with, and an OTLP answer for every ingest code', () => {
    const built: TiError[] = [
      new errors.PayloadTooLargeError(10),
      new errors.UnauthorizedError(),
      new errors.ForbiddenError('budget:read'),
      new errors.AmbiguousCredentialsError('x'),
      new errors.AuthLimitedError(3),
      new errors.HostNotAllowedError('evil.example'),
      new errors.RateLimitedError(1, 5),
      new errors.QuotaExceededError(10),
      new errors.InvalidJsonError('x'),
      new errors.ValidationError([]),
      new errors.BadRequestError('TI_ERR_CONTENT_TYPE', 'x'),
      new errors.NotFoundError('x'),
      new errors.MethodNotAllowedError('GET', '/ingest', ['POST']),
      new errors.DrainingError(),
      new errors.BufferFullError(1),
      new errors.ServiceUnavailableError('x'),
      new errors.InternalError(),
      new errors.ConfigError('x'),
      new errors.UsageError('x'),
      new errors.ConflictError('x'),
    ];
    // Every exported class of this module is built above.
    const classes = Object.values(errors).filter((v) => typeof v === 'function' && v.prototype instanceof TiError);
    expect(new Set(built.map((e) => e.constructor))).toEqual(new Set(classes));
    for (const e of built) {
      expect(ERROR_CODES[e.code].status[0], e.name).toBe(e.httpCode);
      expect(e.toBody()).toEqual(expect.objectContaining({ code: e.code, error: e.message }));
    }
    for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
      if (ERROR_CODES[code].surface === 'ingest') expect(ERROR_CODES[code].otlp, code).toBeDefined();
      // Any code, with any catalogued status, builds; a status not catalogued for it is a programming error.
      for (const status of ERROR_CODES[code].status) expect(new TiError(code, 'x', { status }).httpCode).toBe(status);
    }
    expect(() => new TiError('TI_ERR_VALIDATION', 'x', { status: 415 })).toThrow(/catalogued with 400, not 415/);
  });

  it('gives the OTLP route the answers of the README table', () => {
    expect(otlpAnswer(new errors.BadRequestError('TI_ERR_CONTENT_TYPE', 'x'))).toEqual({ http: 415, grpc: GRPC.INVALID_ARGUMENT });
    expect(otlpAnswer(new errors.QuotaExceededError(1))).toEqual({ http: 403, grpc: GRPC.RESOURCE_EXHAUSTED });
    expect(otlpAnswer(new errors.UsageError('x'))).toEqual({ http: 400, grpc: GRPC.INVALID_ARGUMENT });
    expect(otlpAnswer(new errors.ForbiddenError('ingest'))).toEqual({ http: 403, grpc: GRPC.PERMISSION_DENIED });
    expect(new errors.ForbiddenError('ingest', 'x', { status: 401 }).httpCode).toBe(401);
  });

  it('gives OTLP/gRPC a code its exporters retry exactly when the error says when to come back', () => {
    // The OTLP specification's table: retried are CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE,
    // UNAVAILABLE, DATA_LOSS, and RESOURCE_EXHAUSTED only with a RetryInfo detail.
    const retried = (a: { code: number; retryDelaySeconds?: number }) =>
      [1, 4, 10, 11, 14, 15].includes(a.code) || (a.code === GRPC.RESOURCE_EXHAUSTED && a.retryDelaySeconds !== undefined);
    expect(otlpGrpcAnswer(new errors.RateLimitedError(2.2, 5))).toEqual({ code: GRPC.UNAVAILABLE, retryDelaySeconds: 3 });
    expect(otlpGrpcAnswer(new errors.DrainingError())).toEqual({ code: GRPC.UNAVAILABLE, retryDelaySeconds: 1 });
    expect(otlpGrpcAnswer(new errors.BufferFullError(4))).toEqual({ code: GRPC.UNAVAILABLE, retryDelaySeconds: 4 });
    expect(otlpGrpcAnswer(new errors.QuotaExceededError(1))).toEqual({ code: GRPC.RESOURCE_EXHAUSTED });
    expect(otlpGrpcAnswer(new errors.UnauthorizedError())).toEqual({ code: GRPC.UNAUTHENTICATED });
    expect(otlpGrpcAnswer(new errors.PayloadTooLargeError(10))).toEqual({ code: GRPC.INVALID_ARGUMENT });
    for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
      if (ERROR_CODES[code].surface !== 'ingest') continue;
      // A code the catalog sends with a Retry-After is retried over gRPC, and paced by it.
      const after = new TiError(code, 'x', { headers: { 'Retry-After': '2' } });
      if ([429, 503].includes(ERROR_CODES[code].otlp?.[0] ?? 0)) expect(otlpGrpcAnswer(after), code).toEqual({ code: GRPC.UNAVAILABLE, retryDelaySeconds: 2 });
      else expect(retried(otlpGrpcAnswer(after)), code).toBe(false);
    }
  });

  it('has no code spelled out by hand outside errors.ts', () => {
    const root = new URL('../../', import.meta.url);
    const offenders: string[] = [];
    for (const pkg of fs.readdirSync(root)) {
      const src = new URL(`${pkg}/src/`, root);
      if (!fs.existsSync(src)) continue;
      for (const f of fs.readdirSync(src, { recursive: true, encoding: 'utf8' })) {
        if (!f.endsWith('.ts') || f.endsWith('.test.ts') || f === 'errors.ts') continue;
        const text = fs.readFileSync(new URL(f, src), 'utf8');
        for (const m of text.matchAll(/'(TI_ERR_[A-Z_]+)'/g)) if (!((m[1] ?? '') in ERROR_CODES)) offenders.push(`${pkg}/src/${f}: ${m[1]}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
