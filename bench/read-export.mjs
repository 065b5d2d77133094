#!/usr/bin/env node
// Reads one export to its end, in a process of its own (the benchmark pins it to the load
// generator's core, so that reading does not take the server's): node bench/read-export.mjs URL TOKEN
// → prints {"status", "lines", "bytes", "ms"} (ms from the request to the last byte).
import { request } from 'node:http';

const [url, token] = process.argv.slice(2);
const start = performance.now();
const req = request(url, { headers: { authorization: `Bearer ${token}`, accept: 'application/x-ndjson' } });
req.on('response', (res) => {
  let lines = 0;
  let bytes = 0;
  res.on('data', (chunk) => {
    bytes += chunk.length;
    for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines++;
  });
  res.on('end', () => {
    const ms = performance.now() - start;
    process.stdout.write(`${JSON.stringify({ status: res.statusCode, lines, bytes, ms })}\n`);
  });
});
req.on('error', (err) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
req.end();
