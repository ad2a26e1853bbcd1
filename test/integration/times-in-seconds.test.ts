import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { makeSpan, makeTrace } from '../factories.js';
import { startTestServer } from './support/ingest-server.js';

const CLI = fileURLToPath(new URL('../../packages/cli/bin/trace-ingest.js', import.meta.url));

describe('times sent in seconds', () => {
  it('are accepted as the contract allows, counted in /metrics, and named by doctor', async () => {
    const t = await startTestServer({ DRAIN_TIMEOUT_MS: '2000' });
    onTestFinished(() => t.close());
    const { key } = await t.newKey();
    const seconds = 1_767_225_600;
    const res = await t.post({ version: 'v1', traces: [makeTrace({ spans: [makeSpan({ startTime: seconds, endTime: seconds + 2 }), makeSpan()] })] }, { key });
    expect(res.status).toBe(202);
    expect((await t.server.metrics.spansBefore2001.get()).values[0]?.value).toBe(1);
    const metrics = await (await fetch(`${t.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/^trace_ingest_spans_before_2001_total 1$/m);
    await t.server.flush();
    const doctor = await promisify(execFile)(process.execPath, [CLI, 'doctor', '--json'], {
      env: { PATH: process.env.PATH ?? '', DATA_DIR: t.dir },
      encoding: 'utf8',
    }).catch((e: { stdout: string }) => e);
    const checks = JSON.parse(doctor.stdout) as { name: string; status: string; detail: string }[];
    expect(checks.find((c) => c.name === 'span times')).toMatchObject({
      status: 'warn',
      detail: expect.stringMatching(/^1 span\(s\) received this week have start times before 2001: seconds instead of milliseconds\?$/) as unknown,
    });
  });
});
