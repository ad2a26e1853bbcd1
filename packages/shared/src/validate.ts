import { validatePayload, type ValidationResult } from './schema.js';

/**
 * Validates a parsed request body against the v1 contract. The hot path
 * entry point: callers use this, never the zod schema directly.
 */
export function validateIngest(value: unknown): ValidationResult {
  return validatePayload(value);
}
