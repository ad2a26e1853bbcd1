// Floors: the cheapest servers that still read (and optionally parse) the same bodies.
import http from 'node:http';

const mode = process.argv[2];
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => (mode === 'parse' ? chunks.push(c) : undefined));
  req.on('end', () => {
    let accepted = 0;
    if (mode === 'parse') {
      const p = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const t of p.traces) accepted += t.spans.length;
    }
    res.writeHead(202, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ accepted }));
  });
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
