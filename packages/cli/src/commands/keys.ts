import type { Command } from 'commander';
import { z } from 'zod';
import { KEY_SCOPES } from '@trace-ingest/shared/scopes';
import { createKey, listKeys, revokeKey, scopeText } from '../actions/keys.js';
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
    .option('--scope <scopes>', `what the key may do, comma-separated: ${KEY_SCOPES.join(', ')}`, 'ingest')
    .option('--customer <id>', 'with --scope budget:read: the key reads only this customer (repeat for several)', (v: string, acc: string[]) => [...acc, v], [])
    .option('--json', 'print JSON: {id, key, prefix, org, name, scopes, customers}')
    .addHelpText(
      'after',
      '\nScopes: ingest writes spans (POST /ingest, /v1/traces, OTLP/gRPC) and reads nothing back; budget:read reads\n' +
        "this month's budget and spend (GET /v1/budget), of every customer or only of the --customer ids.\n\n" +
        'Examples:\n' +
        '  trace-ingest keys create --org acme --name checkout-service\n' +
        '  trace-ingest keys create --org acme --name budget-gate --scope budget:read',
    )
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(
          z.object({
            org: z.string().min(1),
            name: z.string().max(256).optional(),
            scope: z.string().min(1),
            customer: z.array(z.string()),
            json: z.boolean().optional(),
          }),
          raw,
        );
        const k = await createKey(ctx, { org: o.org, name: o.name, scope: o.scope, customers: o.customer });
        if (o.json) printJson(out, k);
        else {
          out.out(k.key);
          out.err(`created key ${k.prefix}… (${scopeText(k.scopes, k.customers)}) for org ${k.org}; store it now: it cannot be shown again`);
        }
      }),
    );
  keys
    .command('list')
    .description('list keys (prefix, name, org, scopes, created, revoked; never the key)')
    .option('--org <org>', 'only this org')
    .option('--json', 'print JSON')
    .action((raw: { org?: string; json?: boolean }) =>
      run(async (ctx, out) => {
        const list = await listKeys(ctx, { org: raw.org });
        if (raw.json === true) printJson(out, list);
        else printTable(out, list, ['prefix', 'name', 'org', 'scopes', 'createdAt', 'revokedAt', 'id']);
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
