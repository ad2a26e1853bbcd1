import type { ApiKeyInfo } from '@trace-ingest/store/control-store-types';
import type { CliContext } from '../context.js';

export interface CreatedKeyOutput {
  id: string;
  key: string;
  prefix: string;
  org: string;
  name: string;
}

export interface KeyListing {
  id: string;
  prefix: string;
  name: string;
  org: string;
  createdAt: string;
  revokedAt: string | null;
}

export async function createKey(ctx: CliContext, input: { org: string; name?: string | undefined }): Promise<CreatedKeyOutput> {
  const k = await (await ctx.keys()).createKey({ orgName: input.org, ...(input.name === undefined ? {} : { name: input.name }) });
  return { id: k.id, key: k.key, prefix: k.prefix, org: k.orgName, name: k.name };
}

function listing(k: ApiKeyInfo): KeyListing {
  return {
    id: k.id,
    prefix: k.prefix,
    name: k.name,
    org: k.orgName,
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
