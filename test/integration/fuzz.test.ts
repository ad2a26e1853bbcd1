import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const RUNNER = fileURLToPath(new URL('../fuzz/run.js', import.meta.url));

interface FuzzSummary {
  seed: number;
  bodies: number;
  corpus: number;
  crashes: number;
  status5xx: number;
  nonJson: number;
  polluted: number;
  statuses: Record<string, number>;
  byMutator: Record<string, { sent: number }>;
  rssBeforeKb: number;
  rssAfterKb: number;
  serverAlive: boolean;
  examples: unknown[];
}

function runFuzz(args: string[]): Promise<{ code: number | null; summary: FuzzSummary; stderr: string }> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [RUNNER, '--json', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
    proc.stderr.on('data', (c: Buffer) => (err += c.toString()));
    proc.once('error', reject);
    proc.once('exit', (code) => {
      try {
        resolve({ code, summary: JSON.parse(out) as FuzzSummary, stderr: err });
      } catch {
        reject(new Error(`fuzz runner printed no summary (exit ${code}): ${out.slice(0, 500)} ${err.slice(0, 2000)}`));
      }
    });
  });
}

/**
 * A short run of `npm run fuzz` against the built server binary: the seed
 * corpus (test/fuzz/corpus) and 2000 mutated bodies. Every answer must be
 * JSON and below 500, and the process must stay up.
 */
describe('fuzzing POST /ingest (real child process)', () => {
  it('survives the corpus and 2000 mutated bodies with no 5xx and no non-JSON answer', async () => {
    const { code, summary } = await runFuzz(['--count', '2000', '--seconds', '60', '--concurrency', '8']);
    const failures = JSON.stringify(summary.examples).slice(0, 3000);
    expect(
      { crashes: summary.crashes, status5xx: summary.status5xx, nonJson: summary.nonJson, polluted: summary.polluted, serverAlive: summary.serverAlive },
      failures,
    ).toEqual({
      crashes: 0,
      status5xx: 0,
      nonJson: 0,
      polluted: 0,
      serverAlive: true,
    });
    expect(code).toBe(0);
    // The whole corpus was replayed, and the run reached the parser (not just 401/413).
    expect(summary.corpus).toBeGreaterThanOrEqual(30);
    expect(summary.bodies).toBe(summary.corpus + 2000);
    expect(summary.statuses['400'] ?? 0).toBeGreaterThan(500);
    expect(summary.statuses['202'] ?? 0).toBeGreaterThan(100);
    expect(Object.keys(summary.byMutator).length).toBeGreaterThan(25);
  });
});
