import { UsageError } from './errors.js';
import { CUSTOMER_TEXT } from './fields.js';

/**
 * What an API key may do. A key is made for one job: `ingest` writes spans
 * (POST /ingest, POST /v1/traces, OTLP/gRPC) and reads nothing back;
 * `budget:read` reads this month's budget and spend (GET /v1/budget),
 * optionally of named customers only. Keys made before scopes existed ingest.
 */
export const KEY_SCOPES = ['ingest', 'budget:read'] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];
export const DEFAULT_SCOPES: readonly KeyScope[] = ['ingest'];

const isScope = (s: string): s is KeyScope => (KEY_SCOPES as readonly string[]).includes(s);

/** Scopes from "ingest,budget:read" (the stored form, and the CLI's): known, no repeats, in catalog order. */
export function parseScopes(text: string): KeyScope[] {
  const given = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (given.length === 0) throw new UsageError(`--scope: give one or more of ${KEY_SCOPES.join(', ')}`);
  for (const s of given) if (!isScope(s)) throw new UsageError(`--scope: unknown scope "${s}"; the scopes are ${KEY_SCOPES.join(', ')}`);
  return KEY_SCOPES.filter((s) => given.includes(s));
}

/** The customer ids a budget:read key is limited to, checked as the v1 contract checks a customer id. */
export function parseCustomers(ids: readonly string[]): string[] {
  const max = CUSTOMER_TEXT.id[1];
  for (const id of ids) if (id === '' || [...id].length > max) throw new UsageError(`--customer: a customer id is 1 to ${max} characters`);
  return [...new Set(ids)];
}
