import type { Command } from 'commander';
import { z } from 'zod';
import { createKey, listKeys, revokeKey } from '../actions/keys.js';
import type { Runner } from '../runner.js';
import { parseOptions } from '../options.js';
import { printJson, printTable } from '../output.js';

export function registerKeys(program: Command, run: Runner): void {
  const keys = program.command('keys').description('API keys (stored as SHA-256 hashes; shown once)');
  keys
    .command('create')
    .description('create an API key for an org and print it once')
    .requiredOption('--org <org>', 'org name or id')
    .option('--name <label>', 'a label to recognise the key by')
    .option('--json', 'print JSON: {id, key, prefix, org, name}')
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(z.object({ org: z.string().min(1), name: z.string().max(256).optional(), json: z.boolean().optional() }), raw);
        const k = await createKey(ctx, { org: o.org, name: o.name });
        if (o.json) printJson(out, k);
        else {
          out.out(k.key);
          out.err(`created key ${k.prefix}… for org ${k.org}; store it now: it cannot be shown again`);
        }
      }),
    );
  keys
    .command('list')
    .description('list keys (prefix, name, org, created, revoked; never the key)')
    .option('--org <org>', 'only this org')
    .option('--json', 'print JSON')
    .action((raw: { org?: string; json?: boolean }) =>
      run(async (ctx, out) => {
        const list = await listKeys(ctx, { org: raw.org });
        if (raw.json === true) printJson(out, list);
        else printTable(out, list, ['prefix', 'name', 'org', 'createdAt', 'revokedAt', 'id']);
      }),
    );
  keys
    .command('revoke <prefixOrId>')
    .description('revoke a key; running servers reject it on its next request')
    .option('--json', 'print JSON')
    .action((prefixOrId: string, raw: { json?: boolean }) =>
      run(async (ctx, out) => {
        const k = await revokeKey(ctx, prefixOrId);
        if (raw.json === true) printJson(out, k);
        else out.out(`revoked key ${k.prefix} (${k.id}) of org ${k.org}`);
      }),
    );
}
