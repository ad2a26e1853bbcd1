// Floors: the cheapest HTTP servers that still read the same bodies.
// argv[2]: `discard` reads and drops the body; `parse` also decodes it and runs JSON.parse
// (or, for an OTLP protobuf body, protobufjs's decode from the same .proto files as the server).
// Prints the port on stdout; SIGTERM stops it.
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const mode = process.argv[2];
if (mode !== 'discard' && mode !== 'parse') throw new Error('usage: floor-server.js discard|parse');

let otlp;
function otlpRequest() {
  if (otlp === undefined) {
    const protobuf = createRequire(import.meta.url)('protobufjs');
    const root = new protobuf.Root();
    const dir = fileURLToPath(new URL('../packages/server/proto', import.meta.url));
    root.resolvePath = (_origin, target) => path.join(dir, target);
    root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto');
    otlp = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
  }
  return otlp;
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => {
    if (mode === 'parse') chunks.push(c);
  });
  req.on('end', () => {
    let accepted = 0;
    let status = 202;
    if (mode === 'parse') {
      try {
        if (req.headers['content-type'] === 'application/x-protobuf') {
          const p = otlpRequest().decode(Buffer.concat(chunks));
          for (const rs of p.resourceSpans) for (const ss of rs.scopeSpans) accepted += ss.spans.length;
        } else {
          const p = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          for (const t of p.traces) accepted += t.spans.length;
        }
      } catch {
        status = 400;
      }
    }
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ accepted }));
  });
});
// Loaded before listening, as the service loads its codec at start.
if (mode === 'parse') otlpRequest();
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
