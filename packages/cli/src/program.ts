import { createRequire } from 'node:module';
import { Command } from 'commander';
import { loadConfig } from '@trace-ingest/shared/config';
import { doctor } from './actions/doctor.js';
import { migrate } from './actions/migrate.js';
import { serve } from './actions/serve.js';
import { registerBudgets } from './commands/budgets.js';
import { registerConsole } from './commands/console.js';
import { registerKeys } from './commands/keys.js';
import { registerLifecycle } from './commands/lifecycle.js';
import { registerOrgs } from './commands/orgs.js';
import { registerPlans } from './commands/plans.js';
import { registerPrices } from './commands/prices.js';
import { registerReports } from './commands/reports.js';
import { createContext, type CliContext, type ContextDefaults } from './context.js';
import { failureLine } from './hints.js';
import { printJson, stdio, type Output } from './output.js';
import type { Runner } from './runner.js';

export interface ProgramDeps {
  env: Record<string, string | undefined>;
  out?: Output;
  /** Builds the context (with what the command asks of it); tests may pass their own. */
  context?: (defaults?: ContextDefaults) => CliContext;
}

/** The `trace-ingest` command tree. Reads the same environment variables as the server. */
export function buildProgram(deps: ProgramDeps): Command {
  const out = deps.out ?? stdio;
  const run: Runner = async (fn, defaults) => {
    let ctx: CliContext | undefined;
    try {
      ctx = deps.context?.(defaults) ?? createContext(loadConfig(deps.env), defaults);
      await fn(ctx, out);
    } catch (e) {
      out.err(failureLine(e));
      process.exitCode = 1;
    } finally {
      await ctx?.close().catch(() => undefined);
    }
  };
  const program = new Command('trace-ingest')
    .description(
      'Operate a trace-ingest server: schema, plans, orgs, API keys, prices and console tokens. ' +
        'Uses DATA_DIR, DATABASE_URL and CLICKHOUSE_URL like the server.',
    )
    .version(cliVersion(), '-V, --version', 'print the version')
    // One line and a hint, not the whole help, after a mistyped option or command.
    .showHelpAfterError('(run with --help for the commands and options)')
    .configureOutput({ writeOut: (s) => out.out(s), writeErr: (s) => out.err(s) })
    .exitOverride();

  program
    .command('migrate')
    .description('create or upgrade the schema of the key store and the span store (idempotent)')
    .option('--json', 'print JSON')
    .action((raw: { json?: boolean }) =>
      run(async (ctx, o) => {
        const r = await migrate(ctx);
        if (raw.json === true) printJson(o, r);
        else {
          o.out(`schema is up to date: key store ${r.keyStore}, span store ${r.spanStore}${r.spanStoreNote === undefined ? '' : ` (${r.spanStoreNote})`}`);
          if (r.sealedSecrets > 0) o.out(`${r.sealedSecrets} webhook secret(s) stored in plain text (or under an older key) are sealed now`);
        }
      }),
    );
  program
    .command('serve')
    .description('start the server in the foreground (what `npm start` runs); SIGTERM/SIGINT drain it')
    .addHelpText(
      'after',
      [
        '',
        'Example:',
        '  DATA_DIR=/var/lib/trace-ingest PORT=4000 CONSOLE_PORT=4001 trace-ingest serve',
        '',
        'Environment (all optional; the README lists every variable and its default):',
        '  PORT, HOST                 where it listens (4000, 0.0.0.0)',
        '  DATA_DIR                   key store, span store, write log (./data)',
        '  CLICKHOUSE_URL             spans in ClickHouse instead of the embedded DuckDB',
        '  DATABASE_URL, REDIS_URL    PostgreSQL and Redis, for several replicas',
        '  CONSOLE_PORT, CONSOLE_HOST the cost console (off unless CONSOLE_PORT is set; 127.0.0.1)',
        '  LOG_LEVEL, LOG_PRETTY      logging (info, false)',
      ].join('\n'),
    )
    .action(async () => {
      // Validate the environment here first, so a bad value gets one clear line before any child starts.
      try {
        loadConfig(deps.env);
      } catch (e) {
        out.err(`trace-ingest: ${e instanceof Error ? e.message : String(e)}`);
        process.exitCode = 1;
        return;
      }
      process.exitCode = await serve(deps.env);
    });
  program
    .command('doctor')
    .description('check configuration, data dir, stores, schema and write log, and say what to fix')
    .option('--json', 'print JSON')
    .action((raw: { json?: boolean }) =>
      run(async (ctx, o) => {
        const checks = await doctor(ctx);
        if (raw.json === true) printJson(o, checks);
        else {
          const mark = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL' } as const;
          for (const c of checks) o.out(`${mark[c.status]} ${c.name}: ${c.detail}${c.fix === undefined ? '' : `\n     fix: ${c.fix}`}`);
        }
        if (checks.some((c) => c.status === 'fail')) process.exitCode = 1;
      }),
    );
  registerPlans(program, run);
  registerLifecycle(program, registerOrgs(program, run), run);
  registerKeys(program, run);
  registerPrices(program, run);
  registerReports(program, run);
  registerConsole(program, run);
  registerBudgets(program, run);
  return program;
}

export async function runCli(argv: readonly string[], deps: ProgramDeps): Promise<number> {
  const program = buildProgram(deps);
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (e) {
    const code = (e as { exitCode?: number; code?: string }).exitCode;
    const cmdCode = (e as { code?: string }).code;
    if (cmdCode === 'commander.helpDisplayed' || cmdCode === 'commander.version' || cmdCode === 'commander.help') return 0;
    return code ?? 1;
  }
  return typeof process.exitCode === 'number' ? process.exitCode : 0;
}

/** The package's version (the CLI, the server and the stores ship together). */
function cliVersion(): string {
  return (createRequire(import.meta.url)('../package.json') as { version: string }).version;
}
