import type { Command } from 'commander';
import { z } from 'zod';
import { createConsoleToken, listConsoleTokens, revokeConsoleToken } from '../actions/console.js';
import type { Runner } from '../runner.js';
import { parseOptions } from '../options.js';
import { printJson, printTable } from '../output.js';
import { runningServer } from '../span-access.js';

export function registerConsole(program: Command, run: Runner): void {
  const con = program.command('console').description('the read-only cost console (served on CONSOLE_PORT, loopback by default)');
  const token = con.command('token').description('console tokens (stored as SHA-256 hashes; shown once; revocable)');
  token
    .command('create')
    .description('create a console token and print it once')
    .option('--name <label>', 'who or what the token is for')
    .option('--org <org>', 'only this org (default: every org)')
    .option('--json', 'print JSON: {id, token, prefix, name, org}')
    .action((raw: Record<string, unknown>) =>
      run(async (ctx, out) => {
        const o = parseOptions(z.object({ name: z.string().max(256).optional(), org: z.string().min(1).optional(), json: z.boolean().optional() }), raw);
        const t = await createConsoleToken(ctx, o);
        if (o.json === true) printJson(out, t);
        else {
          out.out(t.token);
          // The running server knows where its console listens; else this process's configuration says.
          const url =
            (await runningServer(ctx.config.adminSocket))?.consoleUrl ??
            (ctx.config.CONSOLE_PORT === undefined
              ? 'the console (off: start the server with CONSOLE_PORT=4001)'
              : `http://${ctx.config.CONSOLE_HOST}:${ctx.config.CONSOLE_PORT}/console/`);
          out.err(
            `created console token ${t.prefix}… for ${t.org === '*' ? 'every org' : `org ${t.org}`}; store it now: it cannot be shown again. ` +
              `Paste it into the sign-in form of ${url}`,
          );
        }
      }),
    );
  token
    .command('list')
    .description('list console tokens (prefix, name, org, created, revoked; never the token)')
    .option('--json', 'print JSON')
    .action((raw: { json?: boolean }) =>
      run(async (ctx, out) => {
        const list = await listConsoleTokens(ctx);
        if (raw.json === true) printJson(out, list);
        else printTable(out, list, ['prefix', 'name', 'org', 'createdAt', 'revokedAt', 'id']);
      }),
    );
  token
    .command('revoke <prefixOrId>')
    .description('revoke a console token; a running server refuses it on its next request')
    .option('--json', 'print JSON')
    .action((prefixOrId: string, raw: { json?: boolean }) =>
      run(async (ctx, out) => {
        const t = await revokeConsoleToken(ctx, prefixOrId);
        if (raw.json === true) printJson(out, t);
        else out.out(`revoked console token ${t.prefix} (${t.id})`);
      }),
    );
}
