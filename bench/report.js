// Medians, the aligned tables on stdout and the JSON file.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function median(xs) {
  const s = xs.filter((x) => typeof x === 'number' && !Number.isNaN(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Median of every numeric field over runs; other fields from the first run. */
export function medians(runs) {
  const out = { ...runs[0] };
  for (const k of Object.keys(runs[0])) if (typeof runs[0][k] === 'number') out[k] = median(runs.map((r) => r[k]));
  return out;
}

export const fmt = (n, d = 0) =>
  typeof n === 'number' && Number.isFinite(n)
    ? n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d })
    : n === undefined || n === null || Number.isNaN(n)
      ? '-'
      : String(n);

export function table(head, rows) {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (cells) => cells.map((c, i) => (i < 2 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export function printReport(o, results, abuse) {
  const out = [];
  out.push(
    `\ntrace-ingest bench: ${o.connections} connections, ${o.duration} s per measurement, medians of ${o.runs} run(s); ` +
      `${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), load avg ${os
        .loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}, node ${process.version}; store ${process.env.CLICKHOUSE_URL ? 'ClickHouse' : 'DuckDB'}`,
  );
  out.push(
    '\nThroughput and latency (service rows, then the floors measured on the same bodies and connections; ' +
      "CPU µs/span: the server process's user + system CPU, every thread, from ready to exit (load and drain) per stored span; " +
      'for the floors, during the load per span handled)',
  );
  const rows = [];
  for (const w of results) {
    for (const s of w.service) {
      rows.push([
        w.workload,
        s.mode,
        fmt(s.cpuUsPerSpan, 1),
        fmt(s.spansPerSec),
        fmt(s.mbPerSec, 1),
        fmt(s.reqPerSec, 1),
        fmt(s.p50, 1),
        fmt(s.p90, 1),
        fmt(s.p99, 1),
        fmt(s.non2xx + s.errors),
        fmt(s.peakRssMb),
        fmt(s.lagMs),
        fmt(s.walMbAtEnd, 1),
        `${fmt(s.stored)}/${fmt(s.ackedSpans)}`,
        fmt(s.lostSpans),
      ]);
    }
    for (const [name, f] of [
      ['floor discard', w.floors.discard],
      ['floor JSON.parse', w.floors.parse],
    ]) {
      rows.push([
        w.workload,
        name,
        fmt(f.cpuUsPerSpan, 1),
        fmt(f.spansPerSec),
        fmt(f.mbPerSec, 1),
        fmt(f.reqPerSec, 1),
        fmt(f.p50, 1),
        fmt(f.p90, 1),
        fmt(f.p99, 1),
        fmt(f.non2xx + f.errors),
        fmt(f.peakRssMb),
        '-',
        '-',
        '-',
        '-',
      ]);
    }
    rows.push([
      w.workload,
      `floor ${w.floors.store.store} insert`,
      fmt(w.floors.store.cpuUsPerRow, 1),
      fmt(w.floors.store.rowsPerSec),
      fmt(w.floors.store.mbPerSec, 1),
      '-',
      '-',
      '-',
      '-',
      '-',
      '-',
      '-',
      '-',
      `${fmt(w.floors.store.rows)} rows`,
      '-',
    ]);
  }
  out.push(
    table(
      [
        'workload',
        'server',
        'CPU µs/span',
        'spans/s',
        'MB/s',
        'req/s',
        'p50 ms',
        'p90 ms',
        'p99 ms',
        'non-2xx',
        'peak RSS MiB',
        'lag ms',
        'WAL MB',
        'stored/acked',
        'lost',
      ],
      rows,
    ),
  );

  out.push('\nThe service as a fraction of each floor (1.00 = as fast as the floor), and the cost of durability');
  const ratios = [];
  for (const w of results) {
    const mem = w.service.find((s) => s.mode.startsWith('memory'));
    for (const s of w.service) {
      ratios.push([
        w.workload,
        s.mode,
        fmt(s.cpuUsPerSpan / w.floors.parse.cpuUsPerSpan, 1),
        fmt(s.spansPerSec / w.floors.discard.spansPerSec, 3),
        fmt(s.spansPerSec / w.floors.parse.spansPerSec, 2),
        fmt(s.mbPerSec / w.floors.parse.mbPerSec, 2),
        fmt(s.spansPerSec / w.floors.store.rowsPerSec, 2),
        s.mode.startsWith('fsync') && mem ? fmt(s.spansPerSec / mem.spansPerSec, 2) : '-',
        s.mode.startsWith('fsync') && mem ? fmt(s.p50 - mem.p50, 1) : '-',
      ]);
    }
  }
  out.push(
    table(
      [
        'workload',
        'server',
        'CPU ÷ JSON.parse CPU',
        'spans ÷ discard',
        'spans ÷ JSON.parse',
        'MB/s ÷ JSON.parse',
        'spans ÷ store insert',
        'fsync ÷ memory',
        'fsync p50 +ms',
      ],
      ratios,
    ),
  );

  const fixed = results.flatMap((w) => (w.latency ?? []).map((s) => ({ workload: w.workload, ...s })));
  if (fixed.length > 0) {
    const target = o.latencyRate === undefined ? 'target = half of the median req/s of the closed-loop runs above' : 'target forced with --latency-rate';
    const title = o.latencyRate === undefined ? 'Latency at half of the maximum rate' : 'Latency at a fixed rate';
    out.push(
      `\n${title} (open loop, evenly spaced sends over at most ${o.connections} connections, ` +
        `latency from each request's scheduled send time; fresh server per run; ${target})`,
    );
    out.push(
      table(
        ['workload', 'server', 'target req/s', 'achieved req/s', 'spans/s', 'p50 ms', 'p90 ms', 'p99 ms', 'non-2xx', 'lost'],
        fixed.map((s) => [
          s.workload,
          s.mode,
          fmt(s.targetReqPerSec),
          fmt(s.reqPerSec, 1),
          fmt(s.spansPerSec),
          fmt(s.p50, 1),
          fmt(s.p90, 1),
          fmt(s.p99, 1),
          fmt(s.non2xx + s.errors),
          fmt(s.lostSpans),
        ]),
      ),
    );
  }

  if (abuse) {
    out.push(`\nMemory and abuse (fresh server per case, INGEST_DURABILITY=fsync, REQUEST_TIMEOUT_MS=${abuse.requestTimeoutMs})`);
    out.push(
      table(
        ['case', 'answers', 'answer/cut-off ms', 'peak RSS MiB', 'RSS after MiB', 'alive', 'probe', 'probe ms', 'what'],
        abuse.cases.map((c) => [
          c.name,
          c.statuses,
          fmt(c.cutOffMs ?? c.answerMs ?? c.p99Ms),
          fmt(c.peakRssMb),
          fmt(c.rssAfterMb),
          c.alive ? 'yes' : 'NO',
          c.probeStatus ?? '-',
          fmt(c.probeMs),
          c.what,
        ]),
      ),
    );
  }
  console.log(out.join('\n'));
}

export function writeJson(root, o, results, abuse) {
  const dir = path.join(root, 'bench/results');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  const doc = {
    options: o,
    node: process.version,
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    loadavg: os.loadavg(),
    store: process.env.CLICKHOUSE_URL ? 'clickhouse' : 'duckdb',
    results,
    abuse,
  };
  fs.writeFileSync(file, JSON.stringify(doc, null, 2));
  return file;
}
