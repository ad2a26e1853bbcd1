import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { modeText, openToOthers } from '@trace-ingest/shared/data-dir';
import { DAY_MS } from '@trace-ingest/shared/dates';
import { CHECKPOINT_FILE, missingFromCheckpoint, parseCheckpoint, segmentSeq, type MissingSegment } from '@trace-ingest/shared/wal-files';
import type { CliContext } from '../context.js';
import { openSpanAccess, runningServer } from '../span-access.js';
import { readLockHolder } from '@trace-ingest/store/data-dir-lock';
import { FORECAST_WARN_DAYS } from '@trace-ingest/store/disk-forecast';
import { auditCatalog } from './catalog.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';

const DUCKDB_HELD = /Could not set lock on file|Conflicting lock is held/i;

export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do about it, when not ok. */
  fix?: string;
}

/**
 * Checks what a running installation needs, and says what to fix: the data
 * directory, both stores and their schema, the write log, and whether a
 * server answers (found through the admin socket of DATA_DIR, else on PORT).
 */
export async function doctor(ctx: CliContext, opts: { fetchTimeoutMs?: number } = {}): Promise<Check[]> {
  const c = ctx.config;
  const checks: Check[] = [];
  checks.push(await checkDataDir(c.dataDir));
  checks.push(await checkPrivacy(c.dataDir));
  checks.push(checkServerLock(c.dataDir));

  // A server of this DATA_DIR answers on its admin socket whatever port it listens on; PORT is the fallback.
  const running = await runningServer(c.adminSocket);
  const port = running?.port ?? c.PORT;
  const probed = await probeServer(`http://127.0.0.1:${port}/readyz`, opts.fetchTimeoutMs ?? 1500);
  const serverUp = probed === 'down' && running !== undefined ? 'not-ready' : probed;
  checks.push(
    serverUp === 'ready'
      ? { name: 'server', status: 'ok', detail: `a server answers ready on port ${port}` }
      : serverUp === 'not-ready'
        ? {
            name: 'server',
            status: 'warn',
            detail: `a server on port ${port} answers but is not ready`,
            fix: `check GET http://127.0.0.1:${port}/readyz and the server log`,
          }
        : { name: 'server', status: 'warn', detail: `no server answers on port ${port}`, fix: 'start it with "npm start" or "trace-ingest serve"' },
  );

  const storeGone =
    c.CLICKHOUSE_URL === undefined &&
    serverUp !== 'down' &&
    !(await fs.access(c.duckdbFile).then(
      () => true,
      () => false,
    ));
  if (storeGone) {
    // Opening it here would make a new empty file at the path and hide the loss from the running server.
    checks.push({
      name: 'span store',
      status: 'fail',
      detail: `${c.duckdbFile} is missing while a server runs: it was removed under the server, which refuses batches until a file is back`,
      fix: `restore ${c.duckdbFile} from a backup, or run "trace-ingest migrate" to start an empty one (the write log's spans go into it)`,
    });
  } else {
    try {
      const spans = await ctx.spans();
      await spans.ping();
      checks.push({ name: 'span store', status: 'ok', detail: `${spans.kind} reachable, schema up to date` });
    } catch (e) {
      const msg = message(e);
      // DuckDB's own words for a file another process holds; a damaged file's errors ("could not read block ...") are not that.
      const held = c.CLICKHOUSE_URL === undefined && DUCKDB_HELD.test(msg);
      if (held && serverUp !== 'down') {
        checks.push({ name: 'span store', status: 'ok', detail: 'duckdb is held by the running server (one process per file)' });
      } else if (held) {
        checks.push({
          name: 'span store',
          status: 'fail',
          detail: `${c.duckdbFile} is held by another process while no server of this DATA_DIR answers: ${msg}`,
          fix: 'stop the process that holds it (its pid is in the message above); only one process may open the file',
        });
      } else {
        checks.push({
          name: 'span store',
          status: 'fail',
          detail: c.CLICKHOUSE_URL === undefined ? `${c.duckdbFile} could not be opened; it is not held by another process, it looks damaged: ${msg}` : msg,
          fix:
            c.CLICKHOUSE_URL === undefined
              ? `stop the server; restore ${c.duckdbFile} from a backup, or move it aside and run "trace-ingest migrate" to start an empty one ` +
                "(the write log's spans go into it)"
              : 'check CLICKHOUSE_URL and that ClickHouse is reachable',
        });
      }
    }
  }

  if (!storeGone) checks.push(await checkSecondsTimes(ctx));
  if (!storeGone) checks.push(await checkDiskForecast(ctx));
  if (!storeGone) checks.push(await checkPrices(ctx));
  if (!storeGone) checks.push(await checkUnpriced(ctx));
  checks.push(await checkWriteLog(c.walDir, c.BUFFER_MAX_BYTES));
  checks.push(await checkDeadLetters(path.join(c.dataDir, 'dead-letter')));
  return checks;
}

/** Who holds DATA_DIR, from the pid note the server writes beside its lock (read only: doctor never takes the lock). */
function checkServerLock(dataDir: string): Check {
  const name = 'server lock';
  const holder = readLockHolder(dataDir);
  if (holder === undefined) return { name, status: 'ok', detail: `no server holds ${dataDir}` };
  const held = `${dataDir} is held by the server with pid ${holder.pid} on ${holder.host}, started ${holder.startedAt}`;
  if (holder.host !== os.hostname()) return { name, status: 'ok', detail: `${held} (another host: not checked from here)` };
  if (processRuns(holder.pid)) return { name, status: 'ok', detail: held };
  return {
    name,
    status: 'warn',
    detail: `the server with pid ${holder.pid} (started ${holder.startedAt}) did not shut down cleanly: a crash or kill -9`,
    fix: 'its lock went with it; the next start replays the write log. Look in its log for why it stopped',
  };
}

function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Spans stored this month without a price: their cost shows as 0 until priced and repriced. */
async function checkUnpriced(ctx: CliContext): Promise<Check> {
  const name = 'unpriced spans';
  try {
    const now = new Date();
    const month = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString().slice(0, 10);
    const rows = await (
      await openSpanAccess(ctx)
    ).sql(
      `SELECT provider, model_id, sum(unpriced) AS n FROM models_daily WHERE start_date >= '${month}' ` +
        'GROUP BY provider, model_id HAVING sum(unpriced) > 0 ORDER BY n DESC',
      [],
      1000,
    );
    if (rows.length === 0) return { name, status: 'ok', detail: 'every span with a model this month has a price' };
    const total = rows.reduce((n, r) => n + Number(r.n), 0);
    const top = rows
      .slice(0, 3)
      .map((r) => `${String(r.provider) === '' ? '' : `${String(r.provider)}/`}${String(r.model_id)} (${Number(r.n)})`)
      .join(', ');
    return {
      name,
      status: 'warn',
      detail: `${total} spans this month have no price (cost 0): ${top}${rows.length > 3 ? ', ...' : ''}`,
      fix: 'see "trace-ingest prices unpriced"; add a price with "prices set" (or "prices audit --adopt"), then "trace-ingest reprice"',
    };
  } catch (e) {
    return { name, status: 'warn', detail: `could not count unpriced spans: ${message(e)}` };
  }
}

/** Models with spans this month whose price the second catalog disputes. */
async function checkPrices(ctx: CliContext): Promise<Check> {
  const name = 'prices';
  try {
    const month = new Date();
    const r = await auditCatalog(ctx, { seen: true, since: Date.UTC(month.getUTCFullYear(), month.getUTCMonth(), 1) });
    if (r.findings.length === 0) return { name, status: 'ok', detail: `the models with spans this month are priced as ${r.second} prices them` };
    const shown = r.findings
      .slice(0, 5)
      .map((f) => `${f.provider}/${f.model}`)
      .join(', ');
    return {
      name,
      status: 'warn',
      detail: `${r.findings.length} models with spans this month are priced otherwise by ${r.second}: ${shown}${r.findings.length > 5 ? ', ...' : ''}`,
      fix: 'check them with "trace-ingest prices audit --seen"; adopt a price with "prices audit --adopt <model>" or set one with "prices set"',
    };
  } catch (e) {
    return { name, status: 'warn', detail: `could not audit the prices: ${message(e)}` };
  }
}

/** Bytes per span and the recent ingest rate, against the free space of the span store's disk. */
async function checkDiskForecast(ctx: CliContext): Promise<Check> {
  const name = 'disk forecast';
  try {
    const f = await (await openSpanAccess(ctx)).disk();
    const gib = (n: number) => `${(n / 1024 ** 3).toFixed(2)} GiB`;
    const used = `span store ${gib(f.usedBytes)}, ${f.spans} spans (${Math.round(f.bytesPerSpan)} bytes each), ${f.spansLastDay} spans in the last day`;
    if (f.freeBytes === undefined) return { name, status: 'ok', detail: `${used}; the free space of the store's disk is not known here` };
    if (f.daysUntilFull === undefined) return { name, status: 'ok', detail: `${used}; ${gib(f.freeBytes)} free, not filling` };
    const detail = `${used}; ${gib(f.freeBytes)} free: full in ${f.daysUntilFull.toFixed(1)} days at this rate`;
    if (f.daysUntilFull >= FORECAST_WARN_DAYS) return { name, status: 'ok', detail };
    return {
      name,
      status: 'warn',
      detail,
      fix: 'add disk space, or shorten retention ("trace-ingest orgs set-retention <org> --days N --text-days M"; texts are most of the bytes)',
    };
  } catch (e) {
    return { name, status: 'warn', detail: `could not read the store's size: ${message(e)}` };
  }
}

async function checkDataDir(dir: string): Promise<Check> {
  try {
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    const probe = path.join(dir, `.doctor-${process.pid}`);
    const fh = await fs.open(probe, 'w');
    await fh.write('ok');
    await fh.sync();
    await fh.close();
    await fs.rm(probe);
    const st = await fs.stat(dir);
    const stats = await fs.statfs(dir);
    const freeGiB = (stats.bavail * stats.bsize) / 2 ** 30;
    if ((st.mode & 0o002) !== 0) return { name: 'data dir', status: 'warn', detail: `${dir} is world-writable`, fix: `chmod o-w ${dir}` };
    if (freeGiB < 2)
      return {
        name: 'data dir',
        status: 'warn',
        detail: `${dir} is writable; only ${freeGiB.toFixed(2)} GiB free`,
        fix: 'free disk space: the write log needs room during a store outage (BUFFER_MAX_BYTES)',
      };
    return { name: 'data dir', status: 'ok', detail: `${dir} is writable; ${freeGiB.toFixed(1)} GiB free` };
  } catch (e) {
    return { name: 'data dir', status: 'fail', detail: message(e), fix: `make ${dir} writable by this user, or set DATA_DIR` };
  }
}

/** The files under DATA_DIR that hold data: the stores, their logs, the write log, dead letters, the secrets key. */
const PRIVATE_ENTRIES = /^(trace-ingest\.sqlite.*|server\.(lock|pid)|spans\.duckdb.*|secrets\.key|quota-owed\.json|wal|dead-letter|tmp)$/;

/** DATA_DIR and what it holds (prompts, key hashes, sealed secrets) readable by the server's user alone. */
async function checkPrivacy(dir: string): Promise<Check> {
  const name = 'data dir privacy';
  try {
    const open: string[] = [];
    const note = async (p: string, shown: string) => {
      const mode = (await fs.stat(p)).mode;
      if (openToOthers(mode) !== 0) open.push(`${shown} ${modeText(mode)}`);
    };
    await note(dir, dir);
    for (const e of await fs.readdir(dir)) {
      if (!PRIVATE_ENTRIES.test(e)) continue;
      const p = path.join(dir, e);
      await note(p, e);
      if ((await fs.stat(p)).isDirectory()) for (const f of (await fs.readdir(p)).slice(0, 1000)) await note(path.join(p, f), `${e}/${f}`);
    }
    if (open.length === 0) return { name, status: 'ok', detail: `${dir} and its files are private to their owner (0700 folders, 0600 files)` };
    return {
      name,
      status: 'warn',
      detail:
        `other users can read or enter: ${open.slice(0, 6).join(', ')}${open.length > 6 ? `, ... (${open.length})` : ''}; ` +
        'they hold prompts, key hashes and webhook secrets',
      fix: `chmod -R go-rwx ${dir}`,
    };
  } catch (e) {
    return { name, status: 'warn', detail: `could not check the modes under ${dir}: ${message(e)}` };
  }
}

/**
 * The segments on disk against the write log's checkpoint. A running server rewrites the
 * checkpoint as it seals and retires segments: it is read before and after the folder, and
 * only a segment both reads expect and the folder lacks is missing.
 */
async function walState(dir: string): Promise<{ bytes: number; segments: number; missing: MissingSegment[] }> {
  const readCheckpoint = () => fs.readFile(path.join(dir, CHECKPOINT_FILE), 'utf8').catch(() => undefined);
  for (let attempt = 0; ; attempt++) {
    const before = await readCheckpoint();
    let bytes = 0;
    let segments = 0;
    const seqs: number[] = [];
    for (const f of await fs.readdir(dir)) {
      const seq = segmentSeq(f);
      if (seq === undefined) continue;
      const size = await fs.stat(path.join(dir, f)).then(
        (st) => st.size,
        () => undefined,
      );
      if (size === undefined) continue; // retired meanwhile
      seqs.push(seq);
      if (size === 0) continue;
      segments++;
      bytes += size;
    }
    const after = await readCheckpoint();
    if (before !== after && attempt < 5) continue;
    const cp = after === undefined ? undefined : parseCheckpoint(after);
    return { bytes, segments, missing: missingFromCheckpoint(cp, seqs) };
  }
}

async function checkWriteLog(dir: string, maxBytes: number): Promise<Check> {
  let state;
  try {
    state = await walState(dir);
  } catch {
    return { name: 'write log', status: 'ok', detail: 'empty (not created yet)' };
  }
  const { bytes, segments, missing } = state;
  if (missing.length > 0) {
    const listed = missing
      .slice(0, 5)
      .map((m) => `${m.seq} (${m.position}, ${m.spans === undefined ? 'spans unknown' : `${m.spans} spans`})`)
      .join(', ');
    const spans = missing.reduce((n, m) => n + (m.spans ?? 0), 0);
    return {
      name: 'write log',
      status: 'fail',
      detail:
        `${missing.length} segment(s) the write log's checkpoint expects are missing: ${listed}${missing.length > 5 ? ', ...' : ''}; ` +
        `removed before their spans were stored (${spans} spans known)`,
      fix:
        `restore the missing .wal files into ${dir} from a backup if there is one; otherwise those acknowledged spans are lost ` +
        '(the server logs and counts them in trace_ingest_wal_missing_segments_total at its next start)',
    };
  }
  const pct = (100 * bytes) / maxBytes;
  if (pct >= 50)
    return {
      name: 'write log',
      status: 'warn',
      detail: `${segments} segment(s), ${bytes} bytes waiting (${pct.toFixed(0)}% of BUFFER_MAX_BYTES)`,
      fix: 'the span store is behind or down: check it and the server log',
    };
  return { name: 'write log', status: 'ok', detail: `${segments} segment(s), ${bytes} bytes waiting for the store` };
}

/** 2001-01-01: a start time before it is nearly always seconds sent as milliseconds. */
const SUSPECT_BEFORE_MS = 978_307_200_000;
const WEEK_MS = 7 * DAY_MS;

async function checkSecondsTimes(ctx: CliContext): Promise<Check> {
  try {
    const access = await openSpanAccess(ctx);
    const [row] = await access.sql('SELECT count(*) AS n FROM spans WHERE start_time < ? AND received_at >= ?', [SUSPECT_BEFORE_MS, Date.now() - WEEK_MS]);
    const n = Number(row?.n ?? 0);
    if (n === 0) return { name: 'span times', status: 'ok', detail: 'no span received this week starts before 2001' };
    return {
      name: 'span times',
      status: 'warn',
      detail: `${n} span(s) received this week have start times before 2001: seconds instead of milliseconds?`,
      fix:
        'send startTime and endTime as epoch milliseconds (e.g. Date.now()); ' +
        'such spans are stored as sent and counted in trace_ingest_spans_before_2001_total',
    };
  } catch (e) {
    return { name: 'span times', status: 'warn', detail: `could not check span times: ${message(e)}` };
  }
}

async function checkDeadLetters(dir: string): Promise<Check> {
  let rows = 0;
  try {
    for (const f of await fs.readdir(dir)) rows += (await fs.readFile(path.join(dir, f), 'utf8')).split('\n').filter(Boolean).length;
  } catch {
    return { name: 'dead letters', status: 'ok', detail: 'none' };
  }
  return rows === 0
    ? { name: 'dead letters', status: 'ok', detail: 'none' }
    : {
        name: 'dead letters',
        status: 'warn',
        detail: `${rows} row(s) refused by the span store in ${dir}`,
        fix: 'read the reasons in those files; fix the schema or the data, then re-insert them',
      };
}

async function probeServer(url: string, timeoutMs: number): Promise<'ready' | 'not-ready' | 'down'> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await res.body?.cancel();
    return res.ok ? 'ready' : 'not-ready';
  } catch {
    return 'down';
  }
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
