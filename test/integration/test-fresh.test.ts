import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';

/**
 * `npm run test:fresh` on a machine where it cannot install what is missing
 * stops before the suite with one line that says what to install.
 */
const SCRIPT = fileURLToPath(new URL('../../scripts/test-fresh.sh', import.meta.url));

/** A PATH of just the tools the script needs before its install step: no chromium, no apt-get. */
function barePath(extra: readonly string[] = []): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-fresh-bin-'));
  fs.chmodSync(dir, 0o755);
  onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const tool of ['bash', 'dirname', 'id', ...extra]) {
    const found = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
    expect(found, tool).not.toBe('');
    fs.symlinkSync(found, path.join(dir, tool));
  }
  // A link to the binary itself, not a symlink: Node.js may live under a folder only root can enter (/root/.cache).
  try {
    fs.linkSync(process.execPath, path.join(dir, 'node'));
  } catch {
    fs.copyFileSync(process.execPath, path.join(dir, 'node'));
    fs.chmodSync(path.join(dir, 'node'), 0o755);
  }
  return dir;
}

const SETPRIV = spawnSync('sh', ['-c', 'command -v setpriv'], { encoding: 'utf8' }).stdout.trim();

function run(pathDir: string, asNobody: boolean) {
  const cmd = asNobody ? [SETPRIV, ['--reuid=65534', '--regid=65534', '--clear-groups', 'bash', SCRIPT]] : ['bash', [SCRIPT]];
  return spawnSync(cmd[0] as string, cmd[1] as string[], { env: { PATH: pathDir, HOME: os.tmpdir() }, encoding: 'utf8', timeout: 30_000 });
}

describe('npm run test:fresh where it cannot install', () => {
  it('with no apt-get: one line naming what to install, exit 1, the suite never started', () => {
    const r = run(barePath(), false);
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^test:fresh: missing .*chromium.* and no apt-get here: install them/);
    expect(r.stdout).not.toContain('running npm test');
  });

  it.runIf(process.getuid?.() === 0 && SETPRIV !== '')('not root and no sudo: one line with the apt-get command to run', () => {
    const r = run(barePath(['apt-get']), true);
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^test:fresh: missing .*chromium.*: run as root, or install them first: sudo apt-get install -y .*chromium/);
    expect(r.stdout).not.toContain('running npm test');
  });
});
