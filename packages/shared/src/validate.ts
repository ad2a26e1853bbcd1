import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { ingestPayloadJsonSchema } from './openapi.js';
import { validatePayload, type IngestPayload, type ValidationResult } from './schema.js';

/**
 * Validation on the hot path: a compiled JSON Schema validator (ajv) built
 * from the same document the OpenAPI file publishes decides the common case;
 * zod runs only when ajv says no, to explain the failure, and its verdict is
 * final. Both count string lengths in code points, as JSON Schema does.
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
  return ajv;
}

let compiled: ValidateFunction | undefined;

function fastValidator(): ValidateFunction {
  compiled ??= createAjv().compile(ingestPayloadJsonSchema());
  return compiled;
}

export function validateIngest(value: unknown): ValidationResult {
  if (fastValidator()(value)) return { ok: true, value: value as IngestPayload };
  return validatePayload(value);
}
