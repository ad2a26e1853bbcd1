import { LIMITS, utf8Bytes } from './limits.js';

/** One ended span waiting to be sent, already serialized (its size is known exactly). */
export interface QueuedSpan {
  /** The trace's fields as JSON without the closing brace: `{"traceId":"…",…`. Shared by the trace's spans. */
  header: string;
  headerBytes: number;
  json: string;
  bytes: number;
}

const OPEN = '{"version":"v1","traces":[';
const CLOSE = ']}';
const SPANS_OPEN = ',"spans":[';
const ENTRY_CLOSE = ']}';
const ENVELOPE_BYTES = OPEN.length + CLOSE.length;
const ENTRY_BYTES = SPANS_OPEN.length + ENTRY_CLOSE.length;

/** The body bytes of a batch holding `span` alone: the least any request with it can be. */
export function soloBodyBytes(span: Pick<QueuedSpan, 'headerBytes' | 'bytes'>): number {
  return ENVELOPE_BYTES + span.headerBytes + ENTRY_BYTES + span.bytes;
}

export function headerJson(header: object): { header: string; headerBytes: number } {
  const h = JSON.stringify(header).slice(0, -1);
  return { header: h, headerBytes: utf8Bytes(h) };
}

/** FIFO of spans bounded in count and bytes; the caller decides what to drop when full. */
export class SpanQueue {
  private items: (QueuedSpan | undefined)[] = [];
  private head = 0;
  spans = 0;
  bytes = 0;

  constructor(
    readonly maxSpans: number,
    readonly maxBytes: number,
  ) {}

  /** Whether `bytes` more fit without dropping. */
  fits(bytes: number): boolean {
    return this.spans < this.maxSpans && this.bytes + bytes <= this.maxBytes;
  }

  push(item: QueuedSpan): void {
    this.items.push(item);
    this.spans++;
    this.bytes += item.bytes;
  }

  peek(): QueuedSpan | undefined {
    return this.items[this.head];
  }

  shift(): QueuedSpan | undefined {
    const item = this.items[this.head];
    if (item === undefined) return undefined;
    this.items[this.head++] = undefined;
    this.spans--;
    this.bytes -= item.bytes;
    // Reclaim the consumed prefix now and then instead of shifting an array on every take.
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  /** Empties the queue; returns how many spans it held. */
  clear(): number {
    const n = this.spans;
    this.items = [];
    this.head = 0;
    this.spans = 0;
    this.bytes = 0;
    return n;
  }
}

export interface Batch {
  body: string;
  spans: number;
  traces: number;
}

/**
 * Takes the oldest spans that fit one request: at most 1000 trace entries,
 * at most 2000 spans per entry (a larger trace continues in another entry
 * with the same traceId), and at most `maxBodyBytes` of body. Spans keep
 * their order; every queued span fits a request alone (checked when queued).
 */
export function takeBatch(queue: SpanQueue, maxBodyBytes: number, limits = LIMITS): Batch | undefined {
  interface Entry {
    header: string;
    parts: string[];
  }
  const entries: Entry[] = [];
  const open = new Map<string, Entry>();
  let bytes = ENVELOPE_BYTES;
  let spans = 0;
  for (let item = queue.peek(); item !== undefined; item = queue.peek()) {
    let entry = open.get(item.header);
    let cost = item.bytes;
    const newEntry = entry === undefined;
    if (newEntry) {
      if (entries.length >= limits.tracesPerBatch) break;
      cost += item.headerBytes + ENTRY_BYTES + (entries.length > 0 ? 1 : 0);
    } else cost += 1;
    if (spans > 0 && bytes + cost > maxBodyBytes) break;
    queue.shift();
    if (entry === undefined) {
      entry = { header: item.header, parts: [] };
      entries.push(entry);
      open.set(item.header, entry);
    }
    entry.parts.push(item.json);
    if (entry.parts.length >= limits.spansPerTrace) open.delete(item.header);
    bytes += cost;
    spans++;
  }
  if (spans === 0) return undefined;
  let body = OPEN;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as Entry;
    body += (i > 0 ? ',' : '') + e.header + SPANS_OPEN + e.parts.join(',') + ENTRY_CLOSE;
  }
  body += CLOSE;
  return { body, spans, traces: entries.length };
}
