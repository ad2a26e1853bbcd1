import type { CliContext } from '../context.js';
import { sealSecrets } from './budgets.js';

export interface MigrateResult {
  keyStore: string;
  spanStore: string;
  /** Set when the span store could not be opened because a running server holds it. */
  spanStoreNote?: string;
  /** Webhook secrets found in plain text (or under an older SECRETS_KEY) and sealed now. */
  sealedSecrets: number;
}

/** Creates or upgrades both stores' schemas; safe to run any number of times. */
export async function migrate(ctx: CliContext): Promise<MigrateResult> {
  const keys = await ctx.keys();
  const sealedSecrets = await sealSecrets(ctx);
  try {
    const spans = await ctx.spans();
    return { keyStore: keys.kind, spanStore: spans.kind, sealedSecrets };
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    // DuckDB allows one process per file: a running server has it open and migrates it on start.
    if (/lock/i.test(msg) && ctx.config.CLICKHOUSE_URL === undefined) {
      return {
        keyStore: keys.kind,
        spanStore: 'duckdb',
        spanStoreNote: 'the span store is held by the running server, which migrates it on start',
        sealedSecrets,
      };
    }
    throw e;
  }
}
