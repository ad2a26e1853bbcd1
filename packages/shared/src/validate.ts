import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { ingestPayloadJsonSchema } from './openapi.js';
import {
  codePointLength,
  formatPath,
  MAX_REPORTED_ISSUES,
  validatePayload,
  type IngestPayload,
  type ValidationIssue,
  type ValidationResult,
} from './schema.js';

/**
 * Validation on the hot path: a compiled JSON Schema validator (ajv) built
 * from the same document the OpenAPI file publishes decides; zod runs only
 * when ajv says no, to explain the failure in its own words. Both count
 * string lengths in code points, as JSON Schema does. Where they disagree
 * ajv's verdict stands: it sees the parsed object as it is, while zod copies
 * records into fresh objects, where an own "__proto__" key vanishes.
 */

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020, formats: string[]) => Ajv2020;

export function createAjv(): Ajv2020 {
  const ajv = new Ajv2020({ allErrors: false, strict: false, allowUnionTypes: true });
  addFormats(ajv, ['uri']);
  ajv.addKeyword({
    keyword: 'x-minimum-field',
    type: 'number',
    schemaType: 'string',
    validate: (field: string, data: number, _schema: unknown, ctx?: { parentData?: unknown }) => {
      const other = (ctx?.parentData as Record<string, unknown> | undefined)?.[field];
      return typeof other !== 'number' || data >= other;
    },
  });
  // The same verdicts as ajv's own minLength/maxLength (code points, as JSON
  // Schema counts them), without counting every string: a string has at most
  // as many code points as UTF-16 units and at least half as many, so most
  // strings are decided by their length alone (counting every text of a large batch was a visible cost per span).
  ajv.removeKeyword('maxLength');
  ajv.removeKeyword('minLength');
  ajv.addKeyword({
    keyword: 'maxLength',
    type: 'string',
    schemaType: 'number',
    errors: false,
    validate: (max: number, s: string) => s.length <= max || codePointLength(s) <= max,
  });
  ajv.addKeyword({
    keyword: 'minLength',
    type: 'string',
    schemaType: 'number',
    errors: false,
    validate: (min: number, s: string) => s.length >= 2 * min || codePointLength(s) >= min,
  });
  return ajv;
}

let compiled: ValidateFunction | undefined;

/**
 * Compiles the validator now rather than on the first request, which would
 * otherwise wait for it.
 */
export function fastValidator(): ValidateFunction {
  compiled ??= createAjv().compile(ingestPayloadJsonSchema());
  return compiled;
}

export function validateIngest(value: unknown): ValidationResult {
  const validate = fastValidator();
  if (validate(value)) return { ok: true, value: value as IngestPayload };
  const explained = validatePayload(value);
  if (!explained.ok) return explained;
  return { ok: false, issues: (validate.errors ?? []).slice(0, MAX_REPORTED_ISSUES).map(ajvIssue) };
}

function ajvIssue(e: ErrorObject): ValidationIssue {
  const parts = e.instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
  return { path: formatPath(parts.map((p) => (/^\d+$/.test(p) ? Number(p) : p))), message: e.message ?? 'is invalid', code: e.keyword };
}
