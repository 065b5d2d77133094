#!/usr/bin/env node
// The ceiling: a bare node:http server with no store and no validation. It answers a fixed
// 20-plant page (GET /plants), a fixed plant (GET /plants/:id), 201 for POST and 204 for DELETE.
// Usage: node bench/ceiling.mjs PORT
import { createServer } from 'node:http';

const page = JSON.stringify(Array.from({ length: 20 }, (_, i) => ({ name: `plant ${i}`, tag: 'tag-1' })));
const one = JSON.stringify({ name: 'plant 1', tag: 'tag-1' });
const json = { 'content-type': 'application/json; charset=utf-8' };

createServer((req, res) => {
  if (req.method === 'POST') {
    req.resume();
    req.on('end', () => res.writeHead(201, { ...json, location: '/plants/1' }).end(one));
  } else if (req.method === 'DELETE') {
    res.writeHead(204).end();
  } else if (req.url.startsWith('/plants/')) {
    res.writeHead(200, json).end(one);
  } else {
    res.writeHead(200, json).end(page);
  }
}).listen(Number(process.argv[2]), '127.0.0.1');
