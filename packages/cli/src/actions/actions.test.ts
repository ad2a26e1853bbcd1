import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { encodeLine, payloadToRows, UNPRICED } from '@trace-ingest/shared/rows';
import { createContext, REPRICE_DUCKDB_MEMORY, type CliContext, type ContextDefaults } from '../context.js';
import { runCli } from '../program.js';
import type { Output } from '../output.js';
import { hashApiKey } from '@trace-ingest/shared/ids';
import { createKey, listKeys, revokeKey } from './keys.js';
import { migrate } from './migrate.js';
import { createOrg, listOrgs, setOrgPlan } from './orgs.js';
import { createPlan, listPlans, updatePlan } from './plans.js';
import { resolveWindow } from './usage.js';

function capture(): Output & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, out: (t) => stdout.push(t), err: (t) => stderr.push(t) };
}

describe('CLI actions', () => {
  let dir: string;
  let ctx: CliContext;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-cli-'));
    ctx = createContext(loadConfig({ DATA_DIR: dir }));
  });
  afterEach(async () => {
    await ctx.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('migrates both stores, twice', async () => {
    expect(await migrate(ctx)).toEqual({ keyStore: 'sqlite', spanStore: 'duckdb', sealedSecrets: 0 });
    await ctx.close();
    expect(await migrate(ctx)).toEqual({ keyStore: 'sqlite', spanStore: 'duckdb', sealedSecrets: 0 });
    expect(fs.existsSync(path.join(dir, 'spans.duckdb'))).toBe(true);
  });

  it('manages plans, orgs and keys', async () => {
    await createPlan(ctx, { name: 'pro', monthlySpans: 5000, rateLimitRps: 50 });
    await updatePlan(ctx, 'pro', { monthlySpans: 6000 });
    expect((await listPlans(ctx)).map((p) => [p.name, p.monthlySpans, p.rateLimitRps])).toEqual([
      ['default', 100_000_000, 1000],
      ['pro', 6000, 50],
    ]);
    await createOrg(ctx, { name: 'acme' });
    await setOrgPlan(ctx, 'acme', 'pro');
    const [org] = await listOrgs(ctx);
    expect(org).toMatchObject({ name: 'acme', plan: 'pro', monthlySpans: 6000, spansThisMonth: 0 });
    const k = await createKey(ctx, { org: 'acme', name: 'ci' });
    expect(k).toMatchObject({ org: 'acme', name: 'ci', prefix: k.key.slice(0, 12) });
    const listed = await listKeys(ctx, { org: 'acme' });
    expect(listed).toHaveLength(1);
    expect(JSON.stringify(listed)).not.toContain(k.key);
    expect((await revokeKey(ctx, k.prefix)).revokedAt).not.toBeNull();
  });

  it('makes keys for one job: ingest by default, budget:read, optionally of named customers; shown in keys list', async () => {
    await createOrg(ctx, { name: 'scoped' });
    const ingest = await createKey(ctx, { org: 'scoped', name: 'app' });
    expect(ingest).toMatchObject({ scopes: ['ingest'], customers: null });
    const reader = await createKey(ctx, { org: 'scoped', name: 'gate', scope: 'budget:read', customers: ['alice@example.com', 'bob'] });
    expect(reader).toMatchObject({ scopes: ['budget:read'], customers: ['alice@example.com', 'bob'] });
    const both = await createKey(ctx, { org: 'scoped', scope: 'budget:read, ingest' });
    expect(both.scopes).toEqual(['ingest', 'budget:read']);
    expect((await listKeys(ctx, { org: 'scoped' })).map((k) => k.scopes).sort()).toEqual([
      'budget:read(alice@example.com,bob)',
      'ingest',
      'ingest,budget:read',
    ]);
    const resolved = await (await ctx.keys()).resolveKeyHash(hashApiKey(reader.key));
    expect(resolved).toMatchObject({ scopes: ['budget:read'], customers: ['alice@example.com', 'bob'] });
    await expect(createKey(ctx, { org: 'scoped', scope: 'admin' })).rejects.toThrow(/unknown scope "admin"; the scopes are ingest, budget:read/);
    await expect(createKey(ctx, { org: 'scoped', customers: ['alice'] })).rejects.toThrow(/give --scope budget:read too/);
  });
});

describe('trace-ingest command line', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-cli-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    process.exitCode = 0;
  });
  const run = async (args: string[]) => {
    const o = capture();
    process.exitCode = 0;
    const code = await runCli(args, { env: { DATA_DIR: dir }, out: o });
    process.exitCode = 0;
    return { code, ...o };
  };

  it('prints JSON for keys create --json', async () => {
    expect((await run(['orgs', 'create', 'acme'])).code).toBe(0);
    const r = await run(['keys', 'create', '--org', 'acme', '--name', 'ci', '--json']);
    expect(r.code).toBe(0);
    const k = JSON.parse(r.stdout.join('')) as Record<string, string>;
    expect(Object.keys(k).sort()).toEqual(['customers', 'id', 'key', 'name', 'org', 'prefix', 'scopes']);
    const list = await run(['keys', 'list', '--json']);
    expect(list.stdout.join('')).not.toContain(k.key);
  });

  it.each([
    [['orgs', 'create', 'x', '--plan', 'nope'], /unknown plan "nope"; see "trace-ingest plans list"$/],
    [['plans', 'create', 'default', '--monthly-spans', '3', '--rate-limit', '1'], /plan "default" already exists; use "plans update" to change it$/],
    [['plans', 'create', 'p', '--monthly-spans', '-3', '--rate-limit', '1'], /--monthly-spans: must be a whole number >= 0/],
    [['plans', 'create', 'p', '--monthly-spans', '3', '--rate-limit', '0'], /--rate-limit: must be >= 1/],
    [['keys', 'create', '--org', 'ghost'], /unknown org "ghost"; see "trace-ingest orgs list"$/],
    [['keys', 'revoke', 'ti_nothing'], /no API key with id or prefix "ti_nothing"; see "trace-ingest keys list"$/],
    [['plans', 'update', 'default'], /give --monthly-spans and\/or --rate-limit/],
  ])('exits non-zero with one clear line for %j', async (args, message) => {
    const r = await run(args);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toHaveLength(1);
    expect(r.stderr[0]).toMatch(message);
  });

  it('refuses a duplicate org', async () => {
    await run(['orgs', 'create', 'acme']);
    const r = await run(['orgs', 'create', 'acme']);
    expect(r.code).toBe(1);
    expect(r.stderr[0]).toBe('trace-ingest: org "acme" already exists');
  });

  it('tells which key to revoke when a prefix is shared', async () => {
    await run(['orgs', 'create', 'acme']);
    const ctx = createContext(loadConfig({ DATA_DIR: dir }));
    try {
      for (const c of 'ab') await (await ctx.keys()).createKey({ orgName: 'acme', key: 'ti_same_prefix_' + c.repeat(20) });
    } finally {
      await ctx.close();
    }
    const r = await run(['keys', 'revoke', 'ti_same_pref']);
    expect(r.code).toBe(1);
    expect(r.stderr).toEqual(['trace-ingest: prefix "ti_same_pref" matches 2 keys; revoke by id instead']);
  });
});

describe('DuckDB memory in a CLI command', () => {
  const memoryLimit = async (ctx: CliContext) => String((await (await ctx.spans()).query("SELECT current_setting('memory_limit') AS m"))[0]?.m);

  it('reprice opens the span store with a smaller cache; DUCKDB_MEMORY_LIMIT wins over it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-cli-mem-'));
    const asked: (ContextDefaults | undefined)[] = [];
    const limits: string[] = [];
    const context = (env: Record<string, string>) => (defaults?: ContextDefaults) => {
      asked.push(defaults);
      const ctx = createContext(loadConfig({ DATA_DIR: dir, ...env }), defaults);
      // The limit the command's store runs with, read before the command closes it.
      return { ...ctx, close: async () => (limits.push(await memoryLimit(ctx)), ctx.close()) };
    };
    try {
      const out = capture();
      expect(await runCli(['orgs', 'create', 'acme'], { env: {}, out, context: context({}) })).toBe(0);
      for (const env of [{}, { DUCKDB_MEMORY_LIMIT: '300MiB' }] as Record<string, string>[])
        expect(await runCli(['reprice', '--org', 'acme', '--from', '2026-01-01', '--to', '2026-01-02'], { env: {}, out, context: context(env) })).toBe(0);
      expect(out.stderr).toEqual([]);
      expect(asked).toEqual([undefined, { duckdbMemoryLimit: REPRICE_DUCKDB_MEMORY }, { duckdbMemoryLimit: REPRICE_DUCKDB_MEMORY }]);
      expect(limits).toEqual(['256.0 MiB', '128.0 MiB', '300.0 MiB']);
    } finally {
      process.exitCode = 0;
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the CLI refuses what cannot be meant', () => {
  const run = async (...argv: string[]) => {
    const out = capture();
    const code = await runCli(argv, { env: { DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'ti-cli-argv-')) }, out });
    // runCli reports a failure through process.exitCode: it must not outlive the case (nor fail the test run).
    process.exitCode = 0;
    return { code, out: out.stdout.join(''), err: out.stderr.join('') };
  };

  it('an impossible date, with one line', async () => {
    const r = await run('usage', '--org', 'acme', '--from', '2026-11-01', '--to', '2026-11-31');
    expect(r.code).not.toBe(0);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toMatch(/--to: not a calendar date/);
    expect(() => resolveWindow({ from: '2026-02-30' })).toThrow(/not a calendar date/);
  });

  it('an org name with a space, naming the argument rather than a --name flag', async () => {
    const r = await run('orgs', 'create', 'Acme Inc');
    expect(r.code).not.toBe(0);
    expect(r.err.trim()).toBe('trace-ingest: the argument <name>: must not contain spaces or control characters');
  });

  it('--json and --csv together', async () => {
    const r = await run('usage', '--org', 'acme', '--json', '--csv');
    expect(r.code).not.toBe(0);
    expect(r.err).toMatch(/--json or --csv, not both/);
  });

  it('an unknown option, with one line and the --help hint, and --version prints the version', async () => {
    const r = await run('usage', '--org', 'acme', '--colour');
    expect(r.code).not.toBe(0);
    expect(r.err.trim().split('\n')).toEqual([expect.stringMatching(/unknown option '--colour'/), expect.stringMatching(/--help/)]);
    const v = await run('--version');
    expect([v.code, v.out.trim()]).toEqual([0, '0.1.0']);
  });
});

describe('usage as a table', () => {
  it('says which range it shows, uses the CSV column names, and on an empty range says where the spans are', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-cli-usage-'));
    const env = { DATA_DIR: dataDir };
    const cli = async (...argv: string[]) => {
      const out = capture();
      const code = await runCli(argv, { env, out });
      process.exitCode = 0;
      return { code, out: out.stdout.join('\n'), err: out.stderr.join('') };
    };
    expect((await cli('orgs', 'create', 'acme')).code).toBe(0);
    const ctx = createContext(loadConfig(env));
    const org = await (await ctx.keys()).getOrg('acme');
    // A customer id as long as the contract allows (128 code points), on one span with every token bucket.
    const longId = `customer-${'x'.repeat(119)}`;
    const rows = payloadToRows(
      {
        version: 'v1',
        traces: [
          {
            traceId: 't',
            customer: { id: longId },
            spans: [
              {
                spanId: 's',
                spanType: 'llm',
                name: 'n',
                startTime: Date.UTC(2026, 0, 5),
                endTime: Date.UTC(2026, 0, 5) + 10,
                modelId: 'some-model-nobody-prices-with-a-long-name-2026-01-05',
                usage: {
                  inputTokens: 123_456_789,
                  cachedInputTokens: 23_456_789,
                  cacheWriteInputTokens: 3_456_789,
                  outputTokens: 456_789,
                  reasoningTokens: 56_789,
                },
              },
            ],
          },
        ],
      },
      { orgId: org!.id, keyPrefix: 'k', receivedAt: 1 },
      () => ({ ...UNPRICED, input_cost: '1234.567890123456789', total_cost: '1234.567890123456789', priced: true }),
    );
    await (await ctx.spans()).insertLines(Buffer.from(rows.map((r) => encodeLine(r) + '\n').join('')), rows.length);
    await ctx.close();

    const empty = await cli('usage', '--org', 'acme', '--month', '2025-12');
    expect(empty.out).toBe(
      'acme by model, spans that started 2025-12-01 to 2025-12-31 (UTC)\n' +
        "no spans in this range; the org's 1 span(s) started from 2026-01-05 to 2026-01-05 (give --from/--to or --month)",
    );
    const header = (text: string) =>
      text
        .split('\n')
        .find((l) => l.includes('group'))
        ?.match(/[a-z_]+/g) ?? [];
    // By default: the group and its cost first, then its spans, within 100 columns whatever the group's length.
    for (const by of ['model', 'customer', 'trace']) {
      const full = await cli('usage', '--org', 'acme', '--month', '2026-01', '--by', by);
      expect(header(full.out), by).toEqual(['group', 'total_cost', 'spans']);
      for (const line of full.out.split('\n')) expect(line.length, line).toBeLessThanOrEqual(100);
      expect(full.out).toContain('1234.567890123456789');
      expect(full.out).toContain('tokens and cost per bucket: --wide');
    }
    // The whole group is there, wrapped in its column.
    const byCustomer = await cli('usage', '--org', 'acme', '--month', '2026-01', '--by', 'customer');
    const firstColumn = byCustomer.out
      .split('\n')
      .filter((l) => l.startsWith('│'))
      .map((l) => l.split('│')[1]?.trim() ?? '')
      .join('');
    expect(firstColumn).toContain(longId);
    // The rest behind --wide (the CSV's names and order).
    const wide = await cli('usage', '--org', 'acme', '--month', '2026-01', '--wide');
    const columns = header(wide.out);
    expect(columns.slice(0, 6)).toEqual(['group', 'total_cost', 'spans', 'unpriced_spans', 'input_tokens', 'cached_input_tokens']);
    expect(columns).toContain('reasoning_cost');
    const csv = await cli('usage', '--org', 'acme', '--month', '2026-01', '--csv');
    for (const col of columns) expect(csv.out.split('\n')[0]?.split(',')).toContain(col);
  });
});
