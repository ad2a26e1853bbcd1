// The load generator, in its own process: argv[2] is a JSON config; prints autocannon's result as JSON.
import fs from 'node:fs';
import autocannon from 'autocannon';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const result = await autocannon({
  url: Array.isArray(cfg.url) ? cfg.url.map((u) => `${u}/ingest`) : `${cfg.url}/ingest`,
  method: 'POST',
  connections: cfg.connections,
  duration: cfg.duration,
  ...(cfg.amount ? { amount: cfg.amount } : {}),
  headers: { 'content-type': 'application/json', authorization: `Bearer ${cfg.key}` },
  body: cfg.body,
  idReplacement: true,
  timeout: 30,
});
process.stdout.write(JSON.stringify({
  requests: result.requests.total,
  non2xx: result.non2xx,
  errors: result.errors,
  timeouts: result.timeouts,
  status: result.statusCodeStats,
  duration: result.duration,
  latency: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max },
  bytesSent: result.requests.total * Buffer.byteLength(cfg.body),
}));
