// A webhook receiver for platform/webhook's tests: it verifies each request
// with the Standard Webhooks reference library (not hrns's code), against
// each secret given as an argument, and prints one JSON line per request:
// {"id": ..., "verified": [true|false per secret], "errors": [...]}.
// It listens on a loopback port it prints first: {"port": N}.
// It answers 204 when the first secret verifies, else 401.
'use strict';
const http = require('http');
const { Webhook } = require('standardwebhooks');

const hooks = process.argv.slice(2).map((s) => new Webhook(s));
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const verified = [];
    const errors = [];
    for (const wh of hooks) {
      try {
        wh.verify(body, req.headers);
        verified.push(true);
        errors.push('');
      } catch (e) {
        verified.push(false);
        errors.push(String(e && e.message));
      }
    }
    process.stdout.write(JSON.stringify({ id: req.headers['webhook-id'] || '', verified, errors }) + '\n');
    res.writeHead(verified[0] ? 204 : 401);
    res.end();
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
