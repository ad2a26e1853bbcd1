import { UsageError } from '@trace-ingest/shared/errors';
import { openConsoleTokens, type ConsoleTokenInfo, type ConsoleTokens } from '@trace-ingest/store/console-tokens';
import type { CliContext } from '../context.js';

export interface ConsoleTokenListing {
  id: string;
  prefix: string;
  name: string;
  /** '*' when the token sees every org. */
  org: string;
  createdAt: string;
  revokedAt: string | null;
}

export interface CreatedConsoleTokenOutput extends ConsoleTokenListing {
  token: string;
}

function listing(t: ConsoleTokenInfo): ConsoleTokenListing {
  return {
    id: t.id,
    prefix: t.prefix,
    name: t.name,
    org: t.orgId === null ? '*' : (t.orgName ?? t.orgId),
    createdAt: new Date(t.createdAt).toISOString(),
    revokedAt: t.revokedAt === null ? null : new Date(t.revokedAt).toISOString(),
  };
}

/** The key store is opened first: its migrations create the tokens' table. */
async function withTokens<T>(ctx: CliContext, fn: (tokens: ConsoleTokens) => Promise<T>): Promise<T> {
  await ctx.keys();
  const tokens = await openConsoleTokens({ sqliteFile: ctx.config.sqliteFile, databaseUrl: ctx.config.DATABASE_URL });
  await tokens.start();
  try {
    return await fn(tokens);
  } finally {
    await tokens.close();
  }
}

export async function createConsoleToken(ctx: CliContext, input: { name?: string | undefined; org?: string | undefined }): Promise<CreatedConsoleTokenOutput> {
  let org: { id: string; name: string } | null = null;
  if (input.org !== undefined) {
    org = await (await ctx.keys()).getOrg(input.org);
    if (org === null) throw new UsageError(`unknown org "${input.org}"; see "trace-ingest orgs list"`);
  }
  const t = await withTokens(ctx, (tokens) => tokens.create({ name: input.name, orgId: org?.id ?? null, orgName: org?.name ?? null }));
  return { ...listing(t), token: t.token };
}

export function listConsoleTokens(ctx: CliContext): Promise<ConsoleTokenListing[]> {
  return withTokens(ctx, async (tokens) => (await tokens.list()).map(listing));
}

export function revokeConsoleToken(ctx: CliContext, prefixOrId: string): Promise<ConsoleTokenListing> {
  return withTokens(ctx, async (tokens) => listing(await tokens.revoke(prefixOrId)));
}
