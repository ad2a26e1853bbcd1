import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import { UsageError } from '@trace-ingest/shared/errors';
import { auditErase, auditReprice } from '@trace-ingest/store/audit';
import type { EraseCounts, EraseTarget } from '@trace-ingest/shared/lifecycle';
import { diskForecast, type DiskForecast } from '@trace-ingest/store/disk-forecast';
import { exportCount, exportLines, exportRows, type ExportFilter } from '@trace-ingest/store/export';
import { readForecastInputs, type SpendJson } from '@trace-ingest/store/forecast';
import { focusLines, focusRecords, type FocusFilter } from '@trace-ingest/store/focus';
import { createPricing } from '@trace-ingest/store/pricing';
import { reprice, usageReport, type RepriceFilter, type RepriceResult, type UsageFilter, type UsageRow } from '@trace-ingest/store/reports';
import type { QueryRow } from '@trace-ingest/store/span-store';
import type { CliContext } from './context.js';

/** Reports and queries on the span store, through a running server or directly. */
export interface SpanAccess {
  readonly via: 'server' | 'direct';
  usage(f: UsageFilter & { limit?: number | undefined }): Promise<UsageRow[]>;
  /** A read-only query; at most `maxRows` rows are read (the store stops there). */
  sql(sql: string, params?: unknown[], maxRows?: number): Promise<QueryRow[]>;
  /** Reprices and records it in the audit log as `actor`'s (the server records what reaches it). */
  reprice(f: RepriceFilter, actor?: string): Promise<RepriceResult>;
  /** An export's rows as canonical lines (chunks of bytes) as the store yields them, and how many there are. */
  exportRows(f: ExportFilter): Promise<{ total: number; rows: AsyncIterable<Buffer> }>;
  /** An export's FOCUS chargeback rows as NDJSON chunks (their number is not known ahead: total 0). */
  focusRows(f: FocusFilter): Promise<{ total: number; rows: AsyncIterable<Buffer> }>;
  /** Erases and, unless a dry run, records it in the audit log as `actor`'s. */
  erase(orgId: string, target: EraseTarget, dryRun: boolean, actor?: string): Promise<EraseCounts>;
  disk(): Promise<DiskForecast>;
  /** What an org's month-end forecast reads, as of `now`. */
  forecastInputs(orgId: string, now: number): Promise<SpendJson>;
}

/** NDJSON from the admin socket, as the bytes arrive. */
function streamRows(socketPath: string, path: string, body: unknown): Promise<{ total: number; rows: AsyncIterable<Buffer> }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request(
      { socketPath, method: 'POST', path, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } },
      (res) => {
        if ((res.statusCode ?? 500) >= 400) {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () =>
            reject(new UsageError(text === '' ? `admin request failed (${res.statusCode})` : ((JSON.parse(text) as { error?: string }).error ?? text))),
          );
          return;
        }
        resolve({ total: Number(res.headers['x-total-rows'] ?? 0), rows: res as AsyncIterable<Buffer> });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

function request<T>(socketPath: string, method: string, path: string, body?: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      { socketPath, method, path, headers: data === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch {
            reject(new Error(`the server's admin socket answered ${res.statusCode ?? '?'} with non-JSON`));
            return;
          }
          if ((res.statusCode ?? 500) >= 400) reject(new UsageError((parsed as { error?: string }).error ?? `admin request failed (${res.statusCode})`));
          else resolve(parsed as T);
        });
      },
    );
    req.setTimeout(600_000, () => req.destroy(new Error('admin request timed out')));
    req.on('error', reject);
    if (data !== undefined) req.write(data);
    req.end();
  });
}

class ServerAccess implements SpanAccess {
  readonly via = 'server';
  constructor(private readonly socket: string) {}
  async usage(f: UsageFilter & { limit?: number | undefined }): Promise<UsageRow[]> {
    return (await request<{ rows: UsageRow[] }>(this.socket, 'POST', '/v1/usage', f)).rows;
  }
  async sql(sql: string, params: unknown[] = [], maxRows?: number): Promise<QueryRow[]> {
    return (await request<{ rows: QueryRow[] }>(this.socket, 'POST', '/v1/query', { sql, params, ...(maxRows === undefined ? {} : { maxRows }) })).rows;
  }
  reprice(f: RepriceFilter, actor = currentActor()): Promise<RepriceResult> {
    return request<RepriceResult>(this.socket, 'POST', '/v1/reprice', { ...f, actor });
  }
  exportRows(f: ExportFilter): Promise<{ total: number; rows: AsyncIterable<Buffer> }> {
    return streamRows(this.socket, '/v1/export/rows', f);
  }
  focusRows(f: FocusFilter): Promise<{ total: number; rows: AsyncIterable<Buffer> }> {
    return streamRows(this.socket, '/v1/export/focus', f);
  }
  erase(orgId: string, target: EraseTarget, dryRun: boolean, actor = currentActor()): Promise<EraseCounts> {
    return request<EraseCounts>(this.socket, 'POST', '/v1/erase', { orgId, ...target, dryRun, actor });
  }
  disk(): Promise<DiskForecast> {
    return request<DiskForecast>(this.socket, 'GET', '/v1/disk');
  }
  forecastInputs(orgId: string, now: number): Promise<SpendJson> {
    return request<SpendJson>(this.socket, 'POST', '/v1/forecast', { orgId, now });
  }
}

class DirectAccess implements SpanAccess {
  readonly via = 'direct';
  constructor(private readonly ctx: CliContext) {}
  async usage(f: UsageFilter & { limit?: number | undefined }): Promise<UsageRow[]> {
    return usageReport(await this.ctx.spans(), f);
  }
  async sql(sql: string, params: unknown[] = [], maxRows?: number): Promise<QueryRow[]> {
    return (await this.ctx.readOnlySpans()).readOnlyQuery(sql, params, maxRows);
  }
  async reprice(f: RepriceFilter, actor = currentActor()): Promise<RepriceResult> {
    const keys = await this.ctx.keys();
    const pricing = await createPricing(keys, { catalogFile: this.ctx.config.PRICE_CATALOG_FILE });
    const result = await reprice(await this.ctx.spans(), pricing.price, f);
    await auditReprice(keys, { actor, filter: f, result });
    return result;
  }
  async exportRows(f: ExportFilter): Promise<{ total: number; rows: AsyncIterable<Buffer> }> {
    const store = await this.ctx.spans();
    return { total: await exportCount(store, f), rows: exportLines(exportRows(store, f)) };
  }
  async focusRows(f: FocusFilter): Promise<{ total: number; rows: AsyncIterable<Buffer> }> {
    return { total: 0, rows: focusLines(focusRecords(await this.ctx.spans(), f)) };
  }
  async erase(orgId: string, target: EraseTarget, dryRun: boolean, actor = currentActor()): Promise<EraseCounts> {
    const counts = await (await this.ctx.spans()).erase(orgId, target, dryRun);
    if (!dryRun) await auditErase(await this.ctx.keys(), { actor, orgId, target, counts });
    return counts;
  }
  async disk(): Promise<DiskForecast> {
    return diskForecast(await this.ctx.spans());
  }
  async forecastInputs(orgId: string, now: number): Promise<SpendJson> {
    return readForecastInputs(await this.ctx.spans(), orgId, now);
  }
}

async function serverAnswers(socket: string): Promise<boolean> {
  return (await runningServer(socket)) !== undefined;
}

/** The server answering on the admin socket of this DATA_DIR, and the port it listens on; undefined when none answers. */
export async function runningServer(socket: string): Promise<{ port: number | undefined; consoleUrl: string | undefined } | undefined> {
  if (!fs.existsSync(socket)) return undefined;
  try {
    const r = await request<{ port?: number; consoleUrl?: string }>(socket, 'GET', '/v1/ping');
    return { port: typeof r.port === 'number' ? r.port : undefined, consoleUrl: typeof r.consoleUrl === 'string' ? r.consoleUrl : undefined };
  } catch {
    return undefined;
  }
}

/** Who runs the command, as the audit log records it. */
export function currentActor(): string {
  let user = 'unknown';
  try {
    user = os.userInfo().username;
  } catch {
    // no passwd entry (a container's arbitrary uid)
  }
  return `${user}@${os.hostname()}`;
}

export interface SpanAccessOptions {
  /** Only ad-hoc reads: without a server, DuckDB's file is attached read-only. */
  readOnly?: boolean;
  /** Through a running server even on ClickHouse, so the server acts on what it holds (an erased customer's metrics). */
  preferServer?: boolean;
}

/**
 * ClickHouse takes any number of clients, so the CLI talks to it directly.
 * DuckDB lets one process hold its file: go through the running server's
 * admin socket when it answers, else open the file.
 */
export async function openSpanAccess(ctx: CliContext, opts: SpanAccessOptions = {}): Promise<SpanAccess> {
  if (ctx.config.CLICKHOUSE_URL !== undefined && opts.preferServer !== true) return new DirectAccess(ctx);
  if (await serverAnswers(ctx.config.adminSocket)) return new ServerAccess(ctx.config.adminSocket);
  if (ctx.config.CLICKHOUSE_URL !== undefined) return new DirectAccess(ctx);
  try {
    await (opts.readOnly === true ? ctx.readOnlySpans() : ctx.spans());
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    if (/lock/i.test(msg)) {
      throw new UsageError(
        `the span store ${ctx.config.duckdbFile} is held by another process and no server answers on ${ctx.config.adminSocket}; ` +
          `run this on the server's machine with the same DATA_DIR, or stop the other process`,
      );
    }
    throw e;
  }
  return new DirectAccess(ctx);
}
