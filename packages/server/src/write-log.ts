import fs from 'node:fs/promises';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { BufferFullError, ServiceUnavailableError } from '@trace-ingest/shared/errors';

/**
 * The append-only write-ahead log behind every 202.
 *
 * A batch's rows (canonical NDJSON lines) are appended as one framed record
 * to the active segment; in `fsync` mode the append resolves only after
 * fdatasync, and appends that arrive while a sync runs share the next one
 * (group commit: commit when the previous sync returns, never on a timer).
 * The flusher seals the active segment, copies sealed segments into the span
 * store and retires each one only after the store confirmed it.
 *
 * Record: [u32 payload length][u32 row count][u32 crc32 of payload][payload].
 * A torn or corrupt tail (a crash during a write whose append never resolved)
 * ends the readable part of a segment.
 */

const HEADER_BYTES = 12;
const READ_AHEAD_BYTES = 1024 * 1024;
const SEGMENT_EXT = '.wal';

export interface WalRecord {
  payload: Buffer;
  rows: number;
}

export interface SegmentInfo {
  seq: number;
  file: string;
  bytes: number;
  /** Known for segments sealed by this process; 0 for segments of an earlier run until read. */
  rows: number;
}

export interface WriteLogOptions {
  dir: string;
  durability: 'fsync' | 'memory';
  /** Above this many bytes on disk, appends fail with BufferFullError (503). */
  maxBytes: number;
  /** The active segment is sealed once it reaches this size. */
  segmentBytes?: number;
}

interface Pending {
  header: Buffer;
  payload: Buffer;
  rows: number;
  resolve: () => void;
  reject: (e: unknown) => void;
}

export class WriteLog {
  private readonly segmentBytes: number;
  private sealed: SegmentInfo[] = [];
  private active: { seq: number; file: string; fh: fs.FileHandle; bytes: number; rows: number } | undefined;
  private nextSeq = 1;
  private queue: Pending[] = [];
  private chain: Promise<void> = Promise.resolve();
  private writeScheduled = false;
  private closed = false;
  private sealedBytes = 0;
  private sealedRows = 0;
  /** Bytes appended but not yet written: counted against maxBytes too. */
  private queuedBytes = 0;

  constructor(private readonly opts: WriteLogOptions) {
    this.segmentBytes = opts.segmentBytes ?? 64 * 1024 * 1024;
  }

  /** Finds segments left by an earlier run (to be replayed) and opens a new active one. */
  async start(): Promise<void> {
    await fs.mkdir(this.opts.dir, { recursive: true });
    const names = (await fs.readdir(this.opts.dir)).filter((n) => n.endsWith(SEGMENT_EXT)).sort();
    for (const name of names) {
      const seq = Number.parseInt(name, 10);
      if (!Number.isSafeInteger(seq)) continue;
      const file = path.join(this.opts.dir, name);
      const { size } = await fs.stat(file);
      if (size === 0) {
        await fs.rm(file, { force: true });
        continue;
      }
      this.sealed.push({ seq, file, bytes: size, rows: 0 });
      this.sealedBytes += size;
      this.nextSeq = Math.max(this.nextSeq, seq + 1);
    }
    await this.openActive();
  }

  private async openActive(): Promise<void> {
    const seq = this.nextSeq++;
    const file = path.join(this.opts.dir, `${String(seq).padStart(20, '0')}${SEGMENT_EXT}`);
    const fh = await fs.open(file, 'a');
    this.active = { seq, file, fh, bytes: 0, rows: 0 };
    if (this.opts.durability === 'fsync') await syncDir(this.opts.dir);
  }

  /** Bytes held on disk (and queued for it) that the store has not confirmed yet. */
  get bytes(): number {
    return this.sealedBytes + (this.active?.bytes ?? 0) + this.queuedBytes;
  }

  /** Rows waiting for the store, as far as this process knows them. */
  get rows(): number {
    return this.sealedRows + (this.active?.rows ?? 0);
  }

  get maxBytes(): number {
    return this.opts.maxBytes;
  }

  /** Rows in the active segment, not yet sealed. */
  get activeRows(): number {
    return this.active?.rows ?? 0;
  }

  get segmentCount(): number {
    return this.sealed.length + (this.active !== undefined && this.active.bytes > 0 ? 1 : 0);
  }

  /** Resolves when the record is written (and synced in fsync mode). */
  append(payload: Buffer, rows: number): Promise<void> {
    if (this.closed) return Promise.reject(new ServiceUnavailableError('write log is closed; the server is shutting down'));
    const size = HEADER_BYTES + payload.length;
    if (this.bytes + size > this.opts.maxBytes) return Promise.reject(new BufferFullError(5));
    const header = Buffer.allocUnsafe(HEADER_BYTES);
    header.writeUInt32LE(payload.length, 0);
    header.writeUInt32LE(rows, 4);
    header.writeUInt32LE(crc32(payload), 8);
    this.queuedBytes += size;
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ header, payload, rows, resolve, reject });
      if (!this.writeScheduled) {
        this.writeScheduled = true;
        this.chain = this.chain.then(() => this.writeQueued());
      }
    });
  }

  private async writeQueued(): Promise<void> {
    this.writeScheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    const active = this.active;
    let size = 0;
    for (const p of batch) size += p.header.length + p.payload.length;
    this.queuedBytes -= size;
    if (active === undefined) {
      for (const p of batch) p.reject(new ServiceUnavailableError('write log is closed; the server is shutting down'));
      return;
    }
    const buffers: Buffer[] = [];
    let rows = 0;
    for (const p of batch) {
      buffers.push(p.header, p.payload);
      rows += p.rows;
    }
    try {
      await writeAll(active.fh, buffers, size);
      if (this.opts.durability === 'fsync') await active.fh.datasync();
    } catch (e) {
      // Cut the segment back to its last whole record so the records after
      // this failure are still readable, then refuse this group.
      await active.fh.truncate(active.bytes).catch(() => undefined);
      const err = new ServiceUnavailableError('could not write the batch to the write log; retry later', 5, e);
      for (const p of batch) p.reject(err);
      return;
    }
    active.bytes += size;
    active.rows += rows;
    for (const p of batch) p.resolve();
    if (active.bytes >= this.segmentBytes) await this.rotate();
  }

  private async rotate(): Promise<void> {
    const active = this.active;
    if (active === undefined || active.bytes === 0) return;
    await active.fh.close();
    this.sealed.push({ seq: active.seq, file: active.file, bytes: active.bytes, rows: active.rows });
    this.sealedBytes += active.bytes;
    this.sealedRows += active.rows;
    this.active = undefined;
    await this.openActive();
  }

  /** Seals the active segment (if it holds anything) and returns every sealed segment, oldest first. */
  async seal(): Promise<SegmentInfo[]> {
    const done = this.chain.then(() => (this.closed ? undefined : this.rotate()));
    this.chain = done.catch(() => undefined);
    await done;
    return [...this.sealed];
  }

  /** Sealed segments waiting for the store, oldest first. */
  pendingSegments(): SegmentInfo[] {
    return [...this.sealed];
  }

  /**
   * A sealed segment's whole records, read and checked one at a time: a
   * segment can hold 64 MiB, and reading and checking it in one piece held
   * the memory for all of it and the event loop for the checksum. Once the
   * records are exhausted, `tail.tornBytes` says how many bytes follow the
   * last whole record (a write interrupted by a crash, never acknowledged).
   */
  async *records(seg: SegmentInfo, tail: { tornBytes: number }): AsyncGenerator<WalRecord> {
    const fh = await fs.open(seg.file, 'r');
    try {
      const { size } = await fh.stat();
      // Read ahead a chunk at a time: one read per record cost more than the
      // record itself for the 1-span batches of a busy small client.
      let buf = Buffer.alloc(0);
      let bufAt = 0;
      const have = async (at: number, n: number): Promise<void> => {
        if (at >= bufAt && at + n <= bufAt + buf.length) return;
        buf = Buffer.allocUnsafe(Math.min(size - at, Math.max(n, READ_AHEAD_BYTES)));
        bufAt = at;
        await readExactly(fh, buf, at);
      };
      let off = 0;
      while (off + HEADER_BYTES <= size) {
        await have(off, HEADER_BYTES);
        const h = off - bufAt;
        const len = buf.readUInt32LE(h);
        const rows = buf.readUInt32LE(h + 4);
        const crc = buf.readUInt32LE(h + 8);
        const end = off + HEADER_BYTES + len;
        if (end > size) break;
        await have(off, HEADER_BYTES + len);
        const payload = buf.subarray(off - bufAt + HEADER_BYTES, end - bufAt);
        if (crc32(payload) !== crc) break;
        yield { payload, rows };
        off = end;
      }
      tail.tornBytes = size - off;
    } finally {
      await fh.close();
    }
  }

  /** Deletes a segment the store has confirmed. */
  async retire(seg: SegmentInfo): Promise<void> {
    const i = this.sealed.findIndex((s) => s.seq === seg.seq);
    if (i < 0) return;
    this.sealed.splice(i, 1);
    this.sealedBytes -= seg.bytes;
    this.sealedRows -= seg.rows;
    await fs.rm(seg.file, { force: true });
  }

  /** Writes what is queued, then closes the active segment. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return this.chain;
    this.closed = true;
    this.chain = this.chain.then(async () => {
      await this.writeQueued();
      const active = this.active;
      this.active = undefined;
      if (active === undefined) return;
      await active.fh.close();
      if (active.bytes === 0) await fs.rm(active.file, { force: true });
    });
    return this.chain;
  }
}

async function writeAll(fh: fs.FileHandle, buffers: Buffer[], total: number): Promise<void> {
  let { bytesWritten } = await fh.writev(buffers);
  if (bytesWritten === total) return;
  // A short write: finish it from where the kernel stopped.
  const rest = Buffer.concat(buffers).subarray(bytesWritten);
  let off = 0;
  while (off < rest.length) {
    ({ bytesWritten } = await fh.write(rest, off, rest.length - off));
    off += bytesWritten;
  }
}

async function readExactly(fh: fs.FileHandle, buf: Buffer, position: number): Promise<void> {
  let done = 0;
  while (done < buf.length) {
    const { bytesRead } = await fh.read(buf, done, buf.length - done, position + done);
    if (bytesRead === 0) throw new Error(`write log segment ended early at byte ${position + done}`);
    done += bytesRead;
  }
}

async function syncDir(dir: string): Promise<void> {
  const fh = await fs.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
