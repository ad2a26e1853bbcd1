// Floors: the cheapest HTTP servers that still read the same bodies.
// argv[2]: `discard` reads and drops the body; `parse` also decodes it and runs JSON.parse.
// Prints the port on stdout; SIGTERM stops it.
import http from 'node:http';

const mode = process.argv[2];
if (mode !== 'discard' && mode !== 'parse') throw new Error('usage: floor-server.js discard|parse');

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
        const p = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        for (const t of p.traces) accepted += t.spans.length;
      } catch {
        status = 400;
      }
    }
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ accepted }));
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
