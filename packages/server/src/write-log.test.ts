import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { BufferFullError } from '@trace-ingest/shared/errors';
import { WriteLog } from './write-log.js';

describe('WriteLog', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ti-wal-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Started, and closed after the test whatever happens in it (close is idempotent). */
  const opened = async (log: WriteLog): Promise<WriteLog> => {
    onTestFinished(() => log.close());
    await log.start();
    return log;
  };

  it('keeps appended records across a reopen, in order', async () => {
    const log = await opened(new WriteLog({ dir, durability: 'fsync', maxBytes: 1 << 20 }));
    await Promise.all(Array.from({ length: 50 }, (_, i) => log.append(Buffer.from(`{"n":${i}}\n`), 1)));
    await log.close();
    await log.close();
    const again = await opened(new WriteLog({ dir, durability: 'fsync', maxBytes: 1 << 20 }));
    const [seg] = again.pendingSegments();
    expect(seg).toBeDefined();
    const { records, tornBytes } = await again.read(seg!);
    expect(tornBytes).toBe(0);
    expect(records.map((r) => r.payload.toString())).toEqual(Array.from({ length: 50 }, (_, i) => `{"n":${i}}\n`));
  });

  it('ignores a torn tail and keeps the whole records before it', async () => {
    const log = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20 }));
    await log.append(Buffer.from('{"a":1}\n'), 1);
    await log.append(Buffer.from('{"a":2}\n'), 1);
    await log.close();
    const [file] = fs.readdirSync(dir).filter((f) => f.endsWith('.wal'));
    const full = path.join(dir, file!);
    fs.truncateSync(full, fs.statSync(full).size - 3);
    const again = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20 }));
    const { records, tornBytes } = await again.read(again.pendingSegments()[0]!);
    expect(records).toHaveLength(1);
    expect(tornBytes).toBeGreaterThan(0);
  });

  it('reads back records of every size across read-ahead chunks, then stops at a corrupt record', async () => {
    const log = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 64 << 20 }));
    // Sizes around the 1 MiB read-ahead: many small ones, then records that straddle and exceed a chunk.
    const sizes = [...Array.from({ length: 300 }, (_, i) => 100 + i * 37), 1 << 20, 5, (1 << 20) - 12, 3 << 20, 7, 700_000, 700_000, 1];
    const payloads = sizes.map((n, i) => Buffer.alloc(n, 0x61 + (i % 26)));
    for (const [i, p] of payloads.entries()) await log.append(p, i + 1);
    await log.append(Buffer.from('corrupted later\n'), 1);
    await log.append(Buffer.from('never read\n'), 1);
    await log.close();
    const [file] = fs.readdirSync(dir).filter((f) => f.endsWith('.wal'));
    const full = path.join(dir, file!);
    // Flip one payload byte of the second-to-last record: its checksum no longer matches.
    const size = fs.statSync(full).size;
    const fd = fs.openSync(full, 'r+');
    fs.writeSync(fd, Buffer.from('X'), 0, 1, size - 12 - 'never read\n'.length - 2);
    fs.closeSync(fd);
    const again = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 64 << 20 }));
    const { records, tornBytes } = await again.read(again.pendingSegments()[0]!);
    expect(records.map((r) => r.rows)).toEqual(sizes.map((_, i) => i + 1));
    for (const [i, r] of records.entries()) expect(r.payload.equals(payloads[i]!)).toBe(true);
    expect(tornBytes).toBe(2 * 12 + 'corrupted later\n'.length + 'never read\n'.length);
  });

  it('refuses appends over maxBytes until segments are retired', async () => {
    const log = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 100 }));
    await log.append(Buffer.alloc(60, 0x61), 1);
    await expect(log.append(Buffer.alloc(60, 0x61), 1)).rejects.toBeInstanceOf(BufferFullError);
    const [seg] = await log.seal();
    await log.retire(seg!);
    await expect(log.append(Buffer.alloc(60, 0x61), 1)).resolves.toBeUndefined();
  });

  it('rotates segments at the size limit', async () => {
    const log = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20, segmentBytes: 1000 }));
    for (let i = 0; i < 10; i++) await log.append(Buffer.alloc(400, 0x61), 1);
    expect(log.pendingSegments()).toHaveLength(3);
  });
});
