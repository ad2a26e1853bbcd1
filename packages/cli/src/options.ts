import { z } from 'zod';
import { UsageError } from '@trace-ingest/shared/errors';

/**
 * Parses commander's raw option strings with zod; one clear line on failure,
 * naming the option (`--org`) or, for the `positional` keys, the argument
 * (`<name>`) that is wrong.
 */
export function parseOptions<T extends z.ZodType>(schema: T, raw: unknown, positional: readonly string[] = []): z.infer<T> {
  const r = schema.safeParse(raw);
  if (r.success) return r.data;
  const label = (path: PropertyKey[]): string => {
    if (path.length === 0) return 'input';
    const key = path.map(String).join('.');
    if (positional.includes(key)) return `the argument <${key}>`;
    return `--${key.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())}`;
  };
  throw new UsageError(r.error.issues.map((i) => `${label(i.path)}: ${i.message}`).join('; '));
}

export const nonNegativeInt = z
  .string()
  .regex(/^\d+$/, { message: 'must be a whole number >= 0' })
  .transform(Number)
  .pipe(z.number().int().max(Number.MAX_SAFE_INTEGER, { message: 'is too large' }));

export const positiveInt = z
  .string()
  .regex(/^\d+$/, { message: 'must be a whole number >= 1' })
  .transform(Number)
  .pipe(z.number().int().min(1, { message: 'must be >= 1' }).max(Number.MAX_SAFE_INTEGER, { message: 'is too large' }));

export const name = z
  .string()
  .trim()
  .min(1, { message: 'must not be empty' })
  .max(128, { message: 'must be at most 128 characters' })
  .regex(/^[^\s\p{Cc}]+$/u, { message: 'must not contain spaces or control characters' });
