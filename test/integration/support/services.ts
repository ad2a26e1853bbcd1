/**
 * The PostgreSQL and Redis servers the integration tests share (the same as
 * the unit tests', overridable the same way); each test takes a schema or a
 * key prefix of its own.
 */
export const PG_URL = process.env.TI_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.TI_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A PostgreSQL URL whose control store lives in `schema`. */
export function withSchema(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('schema', schema);
  return u.toString();
}
