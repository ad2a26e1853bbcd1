import fs from 'node:fs/promises';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { BufferFullError, ServiceUnavailableError } from '@trace-ingest/shared/errors';
import {
  CHECKPOINT_FILE,
  checkpointText,
  missingFromCheckpoint,
  parseCheckpoint,
  segmentName,
  segmentSeq,
  type MissingSegment,
} from '@trace-ingest/shared/wal-files';

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
 * Record: [u32 magic "TIW2"][u32 payload length][u32 row count][u32 crc32 of
 * payload][u32 crc32 of the 16 bytes before it][payload]. Every header field
 * is checked, and the magic frames records, so a reader that meets a damaged
 * record skips to the next record that checks out and keeps it: only a torn
 * tail (a crash during a write whose append never resolved: a record that
 * ends past the end of the file) is dropped. The damaged bytes are handed to
 * the caller (the flusher dead-letters them). Segments written before the
 * magic (12-byte headers: length, rows, payload crc) are still read; their
 * row count, outside any checksum, is taken from the checked payload.
 */

const MAGIC = 0x32574954; // "TIW2" as little-endian bytes
const HEADER_BYTES = 20;
const V1_HEADER_BYTES = 12;
const READ_AHEAD_BYTES = 1024 * 1024;

export interface WalRecord {
  payload: Buffer;
  rows: number;
}

/** Bytes of a segment that could not be read as records: acknowledged spans that are lost unless recovered by hand. */
export interface WalDamage {
  /** Byte offset in the segment. */
  offset: number;
  bytes: Buffer;
  /** Spans the bytes held: the record's own count when its header checked out, else the lines counted in the bytes. */
  spans: number;
  reason: string;
}

/** What a read of a segment found besides its records. */
export interface SegmentTail {
  /** Bytes after the last record that were never acknowledged (a write cut by a crash). */
  tornBytes: number;
  /** Damaged records, skipped with their neighbours kept. */
  damaged?: WalDamage[];
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
  /** Rows of appends not yet written, and of the write in progress: with the active segment's, the rows a seal would take. */
  private queuedRows = 0;
  private writingRows = 0;
  /** Segments the checkpoint (or the numbering) expected at start and the folder lacked: removed before their spans were stored. */
  private missing: MissingSegment[] = [];
  /** Span counts of segments left by an earlier run, as its checkpoint recorded them. */
  private readonly knownRows = new Map<number, number>();
  /** Checkpoint writes, one at a time, in order. */
  private checkpointChain: Promise<void> = Promise.resolve();
  /** The last checkpoint write's failure, until one succeeds. */
  private checkpointFailure: unknown;
  /** The last write's failure, until a write succeeds again. */
  private writeFailure: unknown;

  constructor(private readonly opts: WriteLogOptions) {
    this.segmentBytes = opts.segmentBytes ?? 64 * 1024 * 1024;
  }

  /** Finds segments left by an earlier run (to be replayed) and opens a new active one. */
  async start(): Promise<void> {
    await fs.mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
    const names = (await fs.readdir(this.opts.dir)).filter((n) => segmentSeq(n) !== undefined).sort();
    const checkpoint = await fs.readFile(path.join(this.opts.dir, CHECKPOINT_FILE), 'utf8').then(parseCheckpoint, () => undefined);
    for (const [seq, rows] of checkpoint?.segments ?? []) this.knownRows.set(seq, rows);
    this.missing = missingFromCheckpoint(
      checkpoint,
      names.map((n) => segmentSeq(n) as number),
    );
    // Numbers go on from the highest the checkpoint knew: a missing last segment's number is not reused.
    for (const m of this.missing) this.nextSeq = Math.max(this.nextSeq, m.seq + 1);
    for (const name of names) {
      const seq = segmentSeq(name) as number;
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
    const file = path.join(this.opts.dir, segmentName(seq));
    const fh = await fs.open(file, 'a', 0o600);
    this.active = { seq, file, fh, bytes: 0, rows: 0 };
    if (this.opts.durability === 'fsync') await syncDir(this.opts.dir);
    await this.checkpoint();
  }

  /**
   * Records the segments this log should have (sealed ones with their spans, and the active one),
   * written to a new file and renamed over the old, after the files it names exist and before a
   * retired one is removed. A failed write is kept (checkpointProblem) and redone by the next one.
   */
  private checkpoint(): Promise<void> {
    const text = checkpointText({
      segments: this.sealed.map((s) => [s.seq, s.rows || (this.knownRows.get(s.seq) ?? 0)]),
      active: this.active?.seq,
    });
    const write = this.checkpointChain.then(async () => {
      const file = path.join(this.opts.dir, CHECKPOINT_FILE);
      const tmp = `${file}.tmp`;
      try {
        const fh = await fs.open(tmp, 'w', 0o600);
        try {
          await fh.writeFile(text);
          if (this.opts.durability === 'fsync') await fh.datasync();
        } finally {
          await fh.close();
        }
        await fs.rename(tmp, file);
        if (this.opts.durability === 'fsync') await syncDir(this.opts.dir);
        this.checkpointFailure = undefined;
      } catch (e) {
        this.checkpointFailure = e;
      }
    });
    this.checkpointChain = write;
    return write;
  }

  /** Why the checkpoint could not be written, until a write succeeds. */
  get checkpointProblem(): string | undefined {
    const e = this.checkpointFailure;
    return e === undefined ? undefined : `write log checkpoint cannot be written: ${e instanceof Error ? e.message : String(e)}`;
  }

  /** The spans a segment holds as far as known: its own count, or the one an earlier run's checkpoint recorded. */
  spansOf(seg: SegmentInfo): number | undefined {
    return seg.rows > 0 ? seg.rows : this.knownRows.get(seg.seq);
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

  /** Bytes in the active segment, not yet sealed. */
  get activeBytes(): number {
    return this.active?.bytes ?? 0;
  }

  /** Rows appended and not sealed yet: the active segment's, and those of appends still being written. */
  get unsealedRows(): number {
    return (this.active?.rows ?? 0) + this.queuedRows + this.writingRows;
  }

  get segmentCount(): number {
    return this.sealed.length + (this.active !== undefined && this.active.bytes > 0 ? 1 : 0);
  }

  /** Resolves when the record is written (and synced in fsync mode). */
  append(payload: Buffer, rows: number): Promise<void> {
    if (this.closed) return Promise.reject(new ServiceUnavailableError('write log is closed; the server is shutting down'));
    const size = HEADER_BYTES + payload.length;
    if (this.bytes + size > this.opts.maxBytes) return Promise.reject(new BufferFullError(5));
    const header = encodeHeader(payload, rows);
    this.queuedBytes += size;
    this.queuedRows += rows;
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
    let size = 0;
    let rows = 0;
    for (const p of batch) {
      size += p.header.length + p.payload.length;
      rows += p.rows;
    }
    this.queuedBytes -= size;
    this.queuedRows -= rows;
    if (this.active === undefined && !this.closed) {
      // A rotation whose new segment could not be created (the folder not writable for a while): try again now.
      try {
        await this.openActive();
      } catch (e) {
        const err = new ServiceUnavailableError(`could not create a write log segment in ${this.opts.dir}; retry later`, 5, e);
        this.writeFailure = e;
        for (const p of batch) p.reject(err);
        return;
      }
    }
    const active = this.active;
    if (active === undefined) {
      for (const p of batch) p.reject(new ServiceUnavailableError('write log is closed; the server is shutting down'));
      return;
    }
    const buffers: Buffer[] = [];
    for (const p of batch) buffers.push(p.header, p.payload);
    this.writingRows = rows;
    try {
      await writeAll(active.fh, buffers, size);
      if (this.opts.durability === 'fsync') await active.fh.datasync();
    } catch (e) {
      this.writingRows = 0;
      // Cut the segment back to its last whole record so the records after
      // this failure are still readable, then refuse this group.
      await active.fh.truncate(active.bytes).catch(() => undefined);
      const err = new ServiceUnavailableError('could not write the batch to the write log; retry later', 5, e);
      this.writeFailure = e;
      for (const p of batch) p.reject(err);
      return;
    }
    this.writeFailure = undefined;
    this.writingRows = 0;
    active.bytes += size;
    active.rows += rows;
    for (const p of batch) p.resolve();
    // A rotation that cannot create the next segment leaves none active; the next write creates it.
    if (active.bytes >= this.segmentBytes) await this.rotate().catch(() => undefined);
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

  /** Why the last write failed, until one succeeds again (undefined while writes succeed). */
  get writeProblem(): string | undefined {
    const e = this.writeFailure;
    return e === undefined ? undefined : `write log cannot be written: ${e instanceof Error ? e.message : String(e)}`;
  }

  /** Segments expected at start and not found (each removed before it was stored), with the spans they held when known. */
  get missingAtStart(): readonly MissingSegment[] {
    return this.missing;
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
   * last whole record (a write interrupted by a crash, never acknowledged),
   * and `tail.damaged` lists the records skipped as damaged.
   */
  async *records(seg: SegmentInfo, tail: SegmentTail): AsyncGenerator<WalRecord> {
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
      const damage = async (from: number, to: number, reason: string, spans?: number): Promise<void> => {
        const bytes = Buffer.allocUnsafe(to - from);
        await readExactly(fh, bytes, from);
        (tail.damaged ??= []).push({ offset: from, bytes, spans: spans ?? countLines(bytes), reason });
      };
      if (size >= 4) await have(0, 4);
      if (size >= 4 && buf.readUInt32LE(0) !== MAGIC) {
        yield* this.v1Records(
          size,
          have,
          () => buf,
          () => bufAt,
          tail,
          damage,
        );
        return;
      }
      let off = 0;
      while (off < size) {
        if (off + HEADER_BYTES > size) break;
        await have(off, HEADER_BYTES);
        const h = headerAt(buf, off - bufAt);
        if (h === undefined) {
          // A damaged header: resynchronise on the next header that checks out.
          const next = (await this.nextHeader(fh, off + 1, size)) ?? size;
          await damage(off, next, 'damaged record header (checksum mismatch)');
          off = next;
          continue;
        }
        const end = off + HEADER_BYTES + h.len;
        if (end > size) break; // a record cut by a crash: the torn tail
        await have(off, HEADER_BYTES + h.len);
        const payload = buf.subarray(off - bufAt + HEADER_BYTES, end - bufAt);
        if (crc32(payload) !== h.crc) {
          await damage(off, end, 'damaged record payload (checksum mismatch)', h.rows);
          off = end;
          continue;
        }
        yield { payload, rows: h.rows };
        off = end;
      }
      tail.tornBytes = size - off;
    } finally {
      await fh.close();
    }
  }

  /** The offset of the next header that checks out at or after `from`, scanning for the magic. */
  private async nextHeader(fh: fs.FileHandle, from: number, size: number): Promise<number | undefined> {
    const magic = Buffer.allocUnsafe(4);
    magic.writeUInt32LE(MAGIC, 0);
    const chunk = Buffer.allocUnsafe(READ_AHEAD_BYTES + HEADER_BYTES);
    for (let at = from; at + HEADER_BYTES <= size; at += READ_AHEAD_BYTES) {
      const n = Math.min(chunk.length, size - at);
      const view = chunk.subarray(0, n);
      await readExactly(fh, view, at);
      for (let i = view.indexOf(magic); i >= 0 && i + HEADER_BYTES <= n; i = view.indexOf(magic, i + 1)) {
        if (headerAt(view, i) !== undefined) return at + i;
      }
    }
    return undefined;
  }

  /**
   * A segment written before records carried a magic and a header checksum:
   * a damaged record cannot be skipped (nothing frames the next one), so the
   * rest of the segment is handed over as damaged bytes, never dropped; a row
   * count that disagrees with the checked payload is taken from the payload.
   */
  private async *v1Records(
    size: number,
    have: (at: number, n: number) => Promise<void>,
    buf: () => Buffer,
    bufAt: () => number,
    tail: SegmentTail,
    damage: (from: number, to: number, reason: string) => Promise<void>,
  ): AsyncGenerator<WalRecord> {
    let off = 0;
    while (off + V1_HEADER_BYTES <= size) {
      await have(off, V1_HEADER_BYTES);
      const h = off - bufAt();
      const len = buf().readUInt32LE(h);
      const crc = buf().readUInt32LE(h + 8);
      const end = off + V1_HEADER_BYTES + len;
      if (end > size) break;
      await have(off, V1_HEADER_BYTES + len);
      const payload = buf().subarray(off - bufAt() + V1_HEADER_BYTES, end - bufAt());
      if (crc32(payload) !== crc) {
        await damage(off, size, 'damaged record in a write log segment of the earlier format (the rest of the segment could not be framed)');
        off = size;
        break;
      }
      yield { payload, rows: countLines(payload) };
      off = end;
    }
    tail.tornBytes = size - off;
  }

  /** Deletes a segment the store has confirmed. */
  async retire(seg: SegmentInfo): Promise<void> {
    const i = this.sealed.findIndex((s) => s.seq === seg.seq);
    if (i < 0) return;
    this.sealed.splice(i, 1);
    this.sealedBytes -= seg.bytes;
    this.sealedRows -= seg.rows;
    // The checkpoint stops expecting it before it goes: a crash between the two replays it (stored once), never reports it lost.
    await this.checkpoint();
    await fs.rm(seg.file, { force: true });
    this.knownRows.delete(seg.seq);
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
      // What is left is recorded as sealed, with its spans, for the next start.
      if (active.bytes > 0) {
        this.sealed.push({ seq: active.seq, file: active.file, bytes: active.bytes, rows: active.rows });
        this.sealedBytes += active.bytes;
        this.sealedRows += active.rows;
      }
      await this.checkpoint();
      if (active.bytes === 0) await fs.rm(active.file, { force: true });
    });
    return this.chain;
  }
}

function encodeHeader(payload: Buffer, rows: number): Buffer {
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  header.writeUInt32LE(MAGIC, 0);
  header.writeUInt32LE(payload.length, 4);
  header.writeUInt32LE(rows, 8);
  header.writeUInt32LE(crc32(payload), 12);
  header.writeUInt32LE(crc32(header.subarray(0, 16)), 16);
  return header;
}

/** The header at `at` when its magic and checksum check out. */
function headerAt(buf: Buffer, at: number): { len: number; rows: number; crc: number } | undefined {
  if (at + HEADER_BYTES > buf.length || buf.readUInt32LE(at) !== MAGIC) return undefined;
  if (crc32(buf.subarray(at, at + 16)) !== buf.readUInt32LE(at + 16)) return undefined;
  return { len: buf.readUInt32LE(at + 4), rows: buf.readUInt32LE(at + 8), crc: buf.readUInt32LE(at + 12) };
}

/** Lines in NDJSON bytes (a last line without its newline counts). */
export function countLines(buf: Buffer): number {
  let n = 0;
  for (let at = buf.indexOf(10); at >= 0; at = buf.indexOf(10, at + 1)) n++;
  return buf.length > 0 && buf[buf.length - 1] !== 10 ? n + 1 : n;
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
