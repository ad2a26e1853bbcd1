import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import getRawBody from 'raw-body';
import { BadRequestError, PayloadTooLargeError, TiError } from '@trace-ingest/shared/errors';

const inflaters: Record<string, (buf: Buffer, opts: zlib.ZlibOptions) => Promise<Buffer>> = {
  gzip: promisify(zlib.gunzip) as (buf: Buffer, opts: zlib.ZlibOptions) => Promise<Buffer>,
  'x-gzip': promisify(zlib.gunzip) as (buf: Buffer, opts: zlib.ZlibOptions) => Promise<Buffer>,
  deflate: promisify(zlib.inflate) as (buf: Buffer, opts: zlib.ZlibOptions) => Promise<Buffer>,
  br: promisify(zlib.brotliDecompress) as (buf: Buffer, opts: zlib.ZlibOptions) => Promise<Buffer>,
};

/** Rejects a declared length over the limit before a byte is read. */
export function checkDeclaredLength(headers: Readonly<Record<string, string | string[] | undefined>>, limit: number): void {
  const h = headers['content-length'];
  if (typeof h !== 'string') return;
  const n = Number(h);
  if (Number.isFinite(n) && n > limit) throw new PayloadTooLargeError(limit);
}

/** Only JSON bodies are accepted; a missing Content-Type is taken as JSON. */
export function checkContentType(req: IncomingMessage): void {
  const ct = req.headers['content-type'];
  if (ct === undefined || ct === '') return;
  const type = (ct.split(';')[0] ?? '').trim().toLowerCase();
  if (type === 'application/json' || type.endsWith('+json')) return;
  throw new BadRequestError('TI_ERR_CONTENT_TYPE', `Content-Type must be application/json (got "${type.slice(0, 100)}")`);
}

/** Rejects an unsupported Content-Encoding before a byte is read; undefined for identity. */
function inflaterOf(req: IncomingMessage): { encoding: string; inflate: ((buf: Buffer, opts: zlib.ZlibOptions) => Promise<Buffer>) | undefined } {
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  const inflate = encoding === 'identity' || encoding === '' ? undefined : inflaters[encoding];
  if (encoding !== 'identity' && encoding !== '' && inflate === undefined) {
    throw new BadRequestError('TI_ERR_CONTENT_ENCODING', `unsupported Content-Encoding "${encoding.slice(0, 50)}"; send identity, gzip, deflate or br`);
  }
  return { encoding, inflate };
}

/** True when the body is compressed (it must be inflated after it arrives). */
export function isCompressed(req: IncomingMessage): boolean {
  return inflaterOf(req).inflate !== undefined;
}

export interface ReceiveOptions {
  /**
   * The least a body must arrive at, in bytes per second over 5-second
   * windows (0: no floor): a sender slower than this is cut off with 408, so
   * it does not hold memory reserved for a body it is not sending.
   */
  minBytesPerSec?: number;
}

const RATE_WINDOW_MS = 5000;

/**
 * Receives the body as sent (still compressed), counting bytes as they
 * arrive and stopping at the limit (a chunked body is cut off there; the rest
 * is never buffered).
 */
export async function receiveBody(req: IncomingMessage, limit: number, opts: ReceiveOptions = {}): Promise<Buffer> {
  inflaterOf(req);
  const floor = opts.minBytesPerSec ?? 0;
  let watchdog: NodeJS.Timeout | undefined;
  if (floor > 0) {
    let seen = 0;
    const count = (c: Buffer) => (seen += c.length);
    req.on('data', count);
    let last = 0;
    watchdog = setInterval(() => {
      if (seen - last < (floor * RATE_WINDOW_MS) / 1000) {
        req.off('data', count);
        req.emit('error', new SlowBodyError(floor));
      }
      last = seen;
    }, RATE_WINDOW_MS);
    watchdog.unref();
  }
  try {
    return await getRawBody(req, { limit });
  } catch (e) {
    if (e instanceof SlowBodyError) throw new TiError('TI_ERR_BAD_HTTP', e.message, { status: 408 });
    const type = (e as { type?: string }).type;
    if (type === 'entity.too.large') throw new PayloadTooLargeError(limit);
    if (type === 'request.size.invalid') throw new BadRequestError('TI_ERR_BODY_SIZE', 'request body length does not match Content-Length');
    // A client that went away before or while its body arrived: no answer reaches it, and it is not our fault.
    if (type === 'request.aborted' || (type === 'stream.not.readable' && (req.destroyed || req.socket.destroyed)))
      throw new BadRequestError('TI_ERR_ABORTED', 'request body was aborted by the client');
    throw e;
  } finally {
    clearInterval(watchdog);
  }
}

class SlowBodyError extends Error {
  constructor(floor: number) {
    super(`request body arrived slower than ${floor} bytes/s; send it faster, or in smaller batches`);
  }
}

/** The body as received, inflated when compressed; limited again after inflation, so a small gzip bomb cannot expand past the limit. */
export async function decodeBody(req: IncomingMessage, raw: Buffer, limit: number): Promise<Buffer> {
  const { encoding, inflate } = inflaterOf(req);
  if (inflate === undefined) return raw;
  try {
    return await inflate(raw, { maxOutputLength: limit });
  } catch (e) {
    if ((e as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw new PayloadTooLargeError(limit);
    throw new BadRequestError('TI_ERR_CONTENT_ENCODING', `request body is not valid ${encoding} data`);
  }
}

/** Receives and decodes the body in one go. */
export async function readBody(req: IncomingMessage, limit: number, opts?: ReceiveOptions): Promise<Buffer> {
  return decodeBody(req, await receiveBody(req, limit, opts), limit);
}

/** Bounds how many bodies are read at once, so memory stays flat under bursts of large batches. */
export class BodySlots {
  private free: number;
  private readonly waiters: (() => void)[] = [];

  /** `onChange` reports slots held and requests waiting for one (the server's gauges). */
  constructor(
    private readonly size: number,
    private readonly onChange: (held: number, waiting: number) => void = () => undefined,
  ) {
    this.free = size;
  }

  async acquire(): Promise<() => void> {
    if (this.free > 0) {
      this.free--;
      this.changed();
    } else {
      const turn = new Promise<void>((resolve) => this.waiters.push(resolve));
      this.changed();
      await turn;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next !== undefined) next();
      else this.free++;
      this.changed();
    };
  }

  private changed(): void {
    this.onChange(this.size - this.free, this.waiters.length);
  }
}
