import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, type ErrorCode, TiError, refusalReason } from './errors.js';
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
    for (const code of refusals) for (const s of ERROR_CODES[code].status) expect(ingestResponses, `${code} answers ${s}`).toContain(String(s));
  });

  it('keeps the refusal reasons a small label set', () => {
    const reasons = new Set((Object.keys(ERROR_CODES) as ErrorCode[]).map(refusalReason));
    expect([...reasons].sort()).toEqual(['aborted', 'auth', 'buffer_full', 'draining', 'error', 'quota', 'rate_limit', 'size', 'validation']);
    expect(refusalReason('TI_ERR_VALIDATION')).toBe('validation');
    expect(refusalReason('TI_ERR_INTERNAL')).toBe('error');
  });

  it('answers with a status its code is catalogued with', () => {
    const e = new TiError(413, 'TI_ERR_PAYLOAD_TOO_LARGE', 'too large');
    expect(ERROR_CODES[e.code].status).toContain(e.httpCode);
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
