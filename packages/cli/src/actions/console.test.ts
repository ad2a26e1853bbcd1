import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { openConsoleTokens } from '@trace-ingest/store/console-tokens';
import { createContext } from '../context.js';
import type { Output } from '../output.js';
import { runCli } from '../program.js';
import { createConsoleToken, listConsoleTokens, revokeConsoleToken } from './console.js';
import { createOrg } from './orgs.js';

function setup() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-cli-console-'));
  const ctx = createContext(loadConfig({ DATA_DIR: dir }));
  onTestFinished(async () => {
    await ctx.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { dir, ctx };
}

describe('console token actions', () => {
  it('creates a token once, lists it without the secret, and revokes it', async () => {
    const { ctx } = setup();
    await createOrg(ctx, { name: 'acme' });
    const all = await createConsoleToken(ctx, { name: 'finance' });
    const acme = await createConsoleToken(ctx, { name: 'pm', org: 'acme' });
    expect(all).toMatchObject({ name: 'finance', org: '*', revokedAt: null });
    expect(acme.org).toBe('acme');
    const list = await listConsoleTokens(ctx);
    expect(list.map((t) => [t.prefix, t.org])).toEqual([
      [all.prefix, '*'],
      [acme.prefix, 'acme'],
    ]);
    expect(JSON.stringify(list)).not.toContain(all.token);

    const tokens = await openConsoleTokens({ sqliteFile: ctx.config.sqliteFile });
    onTestFinished(() => tokens.close());
    await tokens.start();
    expect(await tokens.resolve(acme.token)).toMatchObject({ orgId: expect.stringMatching(/^org_/) as unknown });
    expect((await revokeConsoleToken(ctx, acme.prefix)).revokedAt).not.toBeNull();
    expect(await tokens.resolve(acme.token)).toBeNull();
    expect(await tokens.resolve(all.token)).not.toBeNull();
  });

  it('refuses an unknown org with the command that lists orgs', async () => {
    const { ctx } = setup();
    await expect(createConsoleToken(ctx, { org: 'nope' })).rejects.toThrow(/orgs list/);
  });

  it('runs as `console token create|list|revoke` and prints the token on stdout only', async () => {
    const { dir } = setup();
    const stdout: string[] = [];
    const stderr: string[] = [];
    const out: Output = { out: (t) => stdout.push(t), err: (t) => stderr.push(t) };
    const env = { DATA_DIR: dir, CONSOLE_PORT: '4001' };
    expect(await runCli(['console', 'token', 'create', '--name', 'ops'], { env, out })).toBe(0);
    const token = stdout.pop() ?? '';
    expect(token).toMatch(/^tic_/);
    expect(stderr.join('\n')).toContain('http://127.0.0.1:4001/console/');
    expect(stderr.join('\n')).not.toContain(token);
    expect(await runCli(['console', 'token', 'list', '--json'], { env, out })).toBe(0);
    const listed = JSON.parse(stdout.pop() ?? '[]') as { prefix: string }[];
    expect(listed.map((t) => t.prefix)).toEqual([token.slice(0, 12)]);
    expect(await runCli(['console', 'token', 'revoke', token.slice(0, 12)], { env, out })).toBe(0);
    expect(stdout.pop()).toContain('revoked console token');
  });
});
