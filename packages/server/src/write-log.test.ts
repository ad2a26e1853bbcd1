import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { BufferFullError } from '@trace-ingest/shared/errors';
import { WriteLog, type SegmentInfo, type SegmentTail, type WalDamage, type WalRecord } from './write-log.js';

/** Every whole record of a segment, through the reader the flusher uses, and the torn tail after them. */
async function readAll(log: WriteLog, seg: SegmentInfo): Promise<{ records: WalRecord[]; tornBytes: number; damaged: WalDamage[] }> {
  const tail: SegmentTail = { tornBytes: 0 };
  const records: WalRecord[] = [];
  for await (const r of log.records(seg, tail)) records.push(r);
  return { records, tornBytes: tail.tornBytes, damaged: tail.damaged ?? [] };
}

/** Bytes of a record's header. */
const HEADER = 20;

/** XORs `n` bytes of `file` at `at` with `mask`. */
function flip(file: string, at: number, n: number, mask = 0xff): void {
  const fd = fs.openSync(file, 'r+');
  const b = Buffer.alloc(n);
  fs.readSync(fd, b, 0, n, at);
  for (let i = 0; i < n; i++) b[i] = (b[i] as number) ^ mask;
  fs.writeSync(fd, b, 0, n, at);
  fs.closeSync(fd);
}

describe('WriteLog', () => {
  let dir: string;
  /** The one segment file of the log's folder. */
  const segmentFile = (): string => path.join(dir, fs.readdirSync(dir).filter((f) => f.endsWith('.wal'))[0] ?? '');
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
    const { records, tornBytes } = await readAll(again, seg!);
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
    const { records, tornBytes } = await readAll(again, again.pendingSegments()[0]!);
    expect(records).toHaveLength(1);
    expect(tornBytes).toBeGreaterThan(0);
  });

  it('reads back records of every size across read-ahead chunks, and skips a damaged record keeping the ones after it', async () => {
    const log = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 64 << 20 }));
    // Sizes around the 1 MiB read-ahead: many small ones, then records that straddle and exceed a chunk.
    const sizes = [...Array.from({ length: 300 }, (_, i) => 100 + i * 37), 1 << 20, 5, (1 << 20) - 12, 3 << 20, 7, 700_000, 700_000, 1];
    const payloads = sizes.map((n, i) => Buffer.alloc(n, 0x61 + (i % 26)));
    for (const [i, p] of payloads.entries()) await log.append(p, i + 1);
    await log.append(Buffer.from('corrupted later\n'), 1);
    await log.append(Buffer.from('still read\n'), 1);
    await log.close();
    const full = segmentFile();
    // Flip one payload byte of the second-to-last record: its checksum no longer matches.
    const size = fs.statSync(full).size;
    flip(full, size - HEADER - 'still read\n'.length - 2, 1);
    const again = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 64 << 20 }));
    const { records, tornBytes, damaged } = await readAll(again, again.pendingSegments()[0]!);
    expect(records.map((r) => r.rows)).toEqual([...sizes.map((_, i) => i + 1), 1]);
    for (const [i, r] of records.entries()) if (i < payloads.length) expect(r.payload.equals(payloads[i]!)).toBe(true);
    expect(records.at(-1)?.payload.toString()).toBe('still read\n');
    expect(tornBytes).toBe(0);
    expect(damaged.map((d) => [d.spans, d.bytes.length, d.reason])).toEqual([[1, HEADER + 'corrupted later\n'.length, expect.stringMatching(/payload/)]]);
  });

  it('skips a record whose bytes were flipped in the middle of a segment, keeping the 38 around it', async () => {
    const log = await opened(new WriteLog({ dir, durability: 'fsync', maxBytes: 1 << 20 }));
    const batch = (i: number) => Buffer.from(Array.from({ length: 25 }, (_, j) => `{"batch":${i},"span":${j}}\n`).join(''));
    for (let i = 0; i < 39; i++) await log.append(batch(i), 25);
    await log.close();
    const full = segmentFile();
    const recordBytes = HEADER + batch(0).length;
    // Four bytes of record 2, across its header: the reader must resynchronise on the next record.
    flip(full, recordBytes + 2, 4);
    const again = await opened(new WriteLog({ dir, durability: 'fsync', maxBytes: 1 << 20 }));
    const { records, tornBytes, damaged } = await readAll(again, again.pendingSegments()[0]!);
    expect(records).toHaveLength(38);
    expect(records.reduce((n, r) => n + r.rows, 0)).toBe(950);
    expect(tornBytes).toBe(0);
    expect(damaged).toHaveLength(1);
    expect(damaged[0]).toMatchObject({ offset: recordBytes, spans: 25, reason: expect.stringMatching(/header/) as unknown });
  });

  it('checksums every header field: a flipped bit in the row count is a damaged record, never a wrong count', async () => {
    const log = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20 }));
    for (let i = 0; i < 3; i++) await log.append(Buffer.from(`{"a":${i}}\n{"b":${i}}\n`), 2);
    await log.close();
    const full = segmentFile();
    const recordBytes = HEADER + '{"a":0}\n{"b":0}\n'.length;
    // Byte 8 of a header is the row count: 2 becomes 65538.
    flip(full, recordBytes + 8 + 2, 1, 0x01);
    const again = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20 }));
    const { records, damaged } = await readAll(again, again.pendingSegments()[0]!);
    expect(records.map((r) => r.rows)).toEqual([2, 2]);
    expect(damaged.map((d) => d.spans)).toEqual([2]);
  });

  it('reads segments of the earlier format (no magic, row count outside the checksum) with the count taken from the payload', async () => {
    const payloads = ['{"x":1}\n{"x":2}\n', '{"x":3}\n'];
    const parts: Buffer[] = [];
    for (const [i, p] of payloads.entries()) {
      const h = Buffer.alloc(12);
      h.writeUInt32LE(Buffer.byteLength(p), 0);
      h.writeUInt32LE(i === 0 ? 70_000 : 1, 4); // a row count that lies
      h.writeUInt32LE(crc32(Buffer.from(p)), 8);
      parts.push(h, Buffer.from(p));
    }
    fs.writeFileSync(path.join(dir, `${'1'.padStart(20, '0')}.wal`), Buffer.concat(parts));
    const log = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20 }));
    const { records, damaged, tornBytes } = await readAll(log, log.pendingSegments()[0]!);
    expect(records.map((r) => [r.payload.toString(), r.rows])).toEqual([
      [payloads[0], 2],
      [payloads[1], 1],
    ]);
    expect([damaged, tornBytes]).toEqual([[], 0]);
  });

  it('reports segment numbers missing between those found at start', async () => {
    for (const seq of [3, 4, 6, 9]) fs.writeFileSync(path.join(dir, `${String(seq).padStart(20, '0')}.wal`), 'x');
    const log = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20 }));
    expect(log.missingAtStart.map((m) => m.seq)).toEqual([5, 7, 8]);
  });

  it('knows its ends from the checkpoint: a missing first, middle or last segment is reported with its spans', async () => {
    const first = await opened(new WriteLog({ dir, durability: 'fsync', maxBytes: 1 << 20, segmentBytes: 100 }));
    // Five segments of 150 bytes (one record each) and 3, 4, 5, 6, 7 spans.
    for (let i = 0; i < 5; i++) await first.append(Buffer.alloc(150, 0x61), 3 + i);
    await first.close();
    const segs = fs.readdirSync(dir).filter((n) => n.endsWith('.wal'));
    expect(segs).toHaveLength(5);
    for (const i of [0, 2, 4]) fs.rmSync(path.join(dir, segs[i]!));
    const log = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20 }));
    expect(log.missingAtStart).toEqual([
      { seq: 1, spans: 3, position: 'first' },
      { seq: 3, spans: 5, position: 'middle' },
      { seq: 5, spans: 7, position: 'last' },
    ]);
    // The next start expects only what is there now: the loss is reported once.
    await log.close();
    const again = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20 }));
    expect(again.missingAtStart).toEqual([]);
  });

  it('does not report a retired segment as missing', async () => {
    const first = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20 }));
    await first.append(Buffer.from('{"a":1}\n'), 1);
    const [seg] = await first.seal();
    await first.retire(seg!);
    await first.append(Buffer.from('{"a":2}\n'), 1);
    await first.close();
    const log = await opened(new WriteLog({ dir, durability: 'memory', maxBytes: 1 << 20 }));
    expect(log.missingAtStart).toEqual([]);
    expect(log.pendingSegments().map((s) => log.spansOf(s))).toEqual([1]);
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

  it('opens a new segment by itself once its folder is writable again after a failed rotation', async () => {
    const log = await opened(new WriteLog({ dir, durability: 'fsync', maxBytes: 1 << 20, segmentBytes: 100 }));
    execFileSync('chattr', ['+i', dir]);
    try {
      // Fills the segment: it is sealed, and the next one cannot be created.
      await log.append(Buffer.alloc(150, 0x61), 1);
      await expect(log.append(Buffer.from('{"a":1}\n'), 1)).rejects.toThrow(/could not create a write log segment/);
    } finally {
      execFileSync('chattr', ['-i', dir]);
    }
    await expect(log.append(Buffer.from('{"a":2}\n'), 1)).resolves.toBeUndefined();
    const segs = await log.seal();
    const { records } = await readAll(log, segs.at(-1)!);
    expect(records.map((r) => r.payload.toString())).toEqual(['{"a":2}\n']);
  });
});
