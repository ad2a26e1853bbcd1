import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DataDirLock, DataDirLockedError, isDataDirLocked, PID_FILE, readLockHolder } from './data-dir-lock.js';

describe('DataDirLock', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-lock-unit-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('is held by one holder at a time, named in server.pid, and free again once released', () => {
    const first = DataDirLock.acquire(dir);
    expect(readLockHolder(dir)).toMatchObject({ pid: process.pid, host: os.hostname() });
    expect(() => DataDirLock.acquire(dir)).toThrow(DataDirLockedError);
    expect(() => DataDirLock.acquire(dir)).toThrow(`(pid ${process.pid} on ${os.hostname()}`);
    expect(isDataDirLocked(dir)).toBe(true);
    first.release();
    expect(fs.existsSync(path.join(dir, PID_FILE))).toBe(false);
    expect(isDataDirLocked(dir)).toBe(false);
    DataDirLock.acquire(dir).release();
  });

  it('names the holder of a run that did not release it', () => {
    fs.writeFileSync(path.join(dir, PID_FILE), JSON.stringify({ pid: 999_999, startedAt: '2026-01-01T00:00:00.000Z', host: 'h' }));
    const lock = DataDirLock.acquire(dir);
    expect(lock.previous).toMatchObject({ pid: 999_999 });
    expect(readLockHolder(dir)?.pid).toBe(process.pid);
    lock.release();
  });
});
