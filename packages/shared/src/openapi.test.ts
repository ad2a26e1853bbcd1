import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CASES } from '../../../test/conformance-cases.js';
import { makePayload } from '../../../test/factories.js';
import { buildOpenApiDocument, ingestPayloadJsonSchema } from './openapi.js';
import { validatePayload } from './schema.js';
import { createAjv, validateIngest } from './validate.js';

describe('OpenAPI document', () => {
  it('is committed as docs/openapi.json and up to date (run `npm run openapi`)', () => {
    const committed = JSON.parse(fs.readFileSync(new URL('../../../docs/openapi.json', import.meta.url), 'utf8')) as unknown;
    expect(committed).toEqual(buildOpenApiDocument());
  });

  it('is valid OpenAPI 3.1 in shape: every $ref resolves', () => {
    const doc = buildOpenApiDocument();
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    const schemas = (doc.components as { schemas: Record<string, unknown> }).schemas;
    for (const r of refs) expect(schemas).toHaveProperty(r.replace(/^"\$ref":"#\/components\/schemas\//, '').replace(/"$/, ''));
    expect(doc.openapi).toBe('3.1.0');
  });

  // A standard JSON Schema validator (code-point lengths, as JSON Schema defines them) built from the document.
  const strict = createAjv().compile(ingestPayloadJsonSchema());

  it.each(CASES)('says the same as zod: $name', (c) => {
    const p = makePayload();
    c.mutate(p);
    const zodOk = validatePayload(p).ok;
    expect(zodOk).toBe(c.issue === undefined);
    expect(strict(p)).toBe(zodOk);
    expect(validateIngest(p).ok).toBe(zodOk);
  });
});
