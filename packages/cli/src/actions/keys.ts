import { parseScopes, type KeyScope } from '@trace-ingest/shared/scopes';
import type { ApiKeyInfo } from '@trace-ingest/store/control-store-types';
import type { CliContext } from '../context.js';

export interface CreatedKeyOutput {
  id: string;
  key: string;
  prefix: string;
  org: string;
  name: string;
  scopes: KeyScope[];
  /** The customers a budget:read key reads; null: every customer of its org. */
  customers: string[] | null;
}

export interface KeyListing {
  id: string;
  prefix: string;
  name: string;
  org: string;
  /** e.g. "ingest" or "budget:read"; a limited budget:read key lists its customers after it. */
  scopes: string;
  createdAt: string;
  revokedAt: string | null;
}

/** A key for what it will do: `ingest` (the default) or `budget:read`, which `customers` may limit to named customers. */
export async function createKey(
  ctx: CliContext,
  input: { org: string; name?: string | undefined; scope?: string | undefined; customers?: readonly string[] | undefined },
): Promise<CreatedKeyOutput> {
  const k = await (
    await ctx.keys()
  ).createKey({
    orgName: input.org,
    ...(input.name === undefined ? {} : { name: input.name }),
    ...(input.scope === undefined ? {} : { scopes: parseScopes(input.scope) }),
    ...(input.customers === undefined || input.customers.length === 0 ? {} : { customers: input.customers }),
  });
  return { id: k.id, key: k.key, prefix: k.prefix, org: k.orgName, name: k.name, scopes: k.scopes, customers: k.customers };
}

/** Scopes as `keys list` shows them: `budget:read(alice,bob)` for a key limited to named customers. */
export function scopeText(scopes: readonly string[], customers: readonly string[] | null): string {
  return scopes.map((s) => (s === 'budget:read' && customers !== null ? `${s}(${customers.join(',')})` : s)).join(',');
}

function listing(k: ApiKeyInfo): KeyListing {
  return {
    id: k.id,
    prefix: k.prefix,
    name: k.name,
    org: k.orgName,
    scopes: scopeText(k.scopes, k.customers),
    createdAt: new Date(k.createdAt).toISOString(),
    revokedAt: k.revokedAt === null ? null : new Date(k.revokedAt).toISOString(),
  };
}

export async function listKeys(ctx: CliContext, filter: { org?: string | undefined }): Promise<KeyListing[]> {
  const keys = await (await ctx.keys()).listKeys(filter.org === undefined ? {} : { orgName: filter.org });
  return keys.map(listing);
}

export async function revokeKey(ctx: CliContext, prefixOrId: string): Promise<KeyListing> {
  return listing(await (await ctx.keys()).revokeKey(prefixOrId));
}
