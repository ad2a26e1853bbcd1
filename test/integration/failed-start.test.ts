import { createHook } from 'node:async_hooks';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { loadConfig } from '@trace-ingest/shared/config';
import { IngestServer } from '@trace-ingest/server/server';

/** Handles that keep a process alive or run on their own: timers (unref'd ones too), listeners, connections. */
const WATCHED = new Set(['Timeout', 'TCPSERVERWRAP', 'PIPESERVERWRAP', 'TCPWRAP', 'PIPEWRAP']);

/** Records the watched handles created from now on; `open()` names those not yet destroyed. */
function trackHandles(): { open(): string[]; stop(): void } {
  const live = new Map<number, string>();
  const hook = createHook({
    init: (id, type) => void (WATCHED.has(type) && live.set(id, type)),
    destroy: (id) => void live.delete(id),
  }).enable();
  return { open: () => [...live.values()].sort(), stop: () => void hook.disable() };
}

/** A port some other listener holds for the rest of the test. */
async function takenPort(): Promise<number> {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
  onTestFinished(() => new Promise<void>((resolve) => holder.close(() => resolve())));
  return (holder.address() as net.AddressInfo).port;
}

function serverOn(dataDir: string, env: Record<string, string>): IngestServer {
  const config = loadConfig({
    PORT: '0',
    METRICS_PORT: '0',
    CONSOLE_PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    DRAIN_GRACE_MS: '0',
    LOG_LEVEL: 'silent',
    ...env,
  });
  return new IngestServer(config, pino({ level: 'silent' }));
}

describe('a start that fails half-way', () => {
  it.each([
    ['the HTTP port', (port: number) => ({ PORT: String(port) }), /^PORT \d+ is already in use on 127\.0\.0\.1/],
    ['the OTLP/gRPC port', (port: number) => ({ OTLP_GRPC_PORT: String(port) }), /No address added out of total 1 resolved/],
  ])('with %s taken, leaves nothing open: no handle, no timer, DATA_DIR free for the next start', async (_name, taken, refusal) => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-failed-start-'));
    onTestFinished(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const port = await takenPort();

    const handles = trackHandles();
    onTestFinished(() => handles.stop());
    const failed = serverOn(dataDir, taken(port));
    // Without a shutdown from the caller: the start itself closes what it opened.
    await expect(failed.start()).rejects.toThrow(refusal);
    // A destroy is reported on a later turn of the event loop than the close that caused it.
    for (let i = 0; i < 40 && handles.open().length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(handles.open()).toEqual([]);
    expect(failed.metricsPort).toBe(0);
    expect(failed.consolePort).toBe(0);
    expect(fs.existsSync(path.join(dataDir, 'admin.sock'))).toBe(false);

    // The DATA_DIR lock is per file, even within one process: the next server starts only if the failed one released it.
    const next = serverOn(dataDir, {});
    await next.start();
    onTestFinished(() => next.shutdown());
    expect((await fetch(`http://127.0.0.1:${next.port}/healthz`)).status).toBe(200);
    // A shutdown after the failed start has nothing left to close.
    await failed.shutdown();
  });
});
