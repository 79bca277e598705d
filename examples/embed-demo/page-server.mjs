// The embed demo's page server: stands for the web server of your front end. It serves a
// static page, on its own origin (port), that calls the user group service from the browser.
// Run: node examples/embed-demo/page-server.mjs
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PUBLIC = path.join(path.dirname(fileURLToPath(import.meta.url)), 'public');
const BACKEND_URL = (process.env.BACKEND_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
// Optional: examples/postgres-rls's data API, which the page calls with the embed token.
const DATA_API_URL = (process.env.DATA_API_URL || '').replace(/\/$/, '') || null;
const HOST = process.env.HOST || '127.0.0.1';
const PORT = Number(process.env.PORT ?? 8081);
const FILES = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/app.js': ['app.js', 'text/javascript; charset=utf-8'],
  '/style.css': ['style.css', 'text/css; charset=utf-8'],
};

const server = http.createServer((req, res) => {
  const { pathname } = new URL(req.url, 'http://page');
  if (req.method === 'GET' && pathname === '/config.json') {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ backendUrl: BACKEND_URL, dataApiUrl: DATA_API_URL }));
    return;
  }
  const file = req.method === 'GET' ? FILES[pathname] : undefined;
  if (!file) {
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found');
    return;
  }
  res.writeHead(200, { 'content-type': file[1], 'cache-control': 'no-store' });
  res.end(fs.readFileSync(path.join(PUBLIC, file[0])));
});

server.listen(PORT, HOST, () => {
  const { port } = server.address();
  console.log(`embed demo page listening on http://${HOST}:${port} (backend ${BACKEND_URL}, data API ${DATA_API_URL ?? 'none'})`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.on('SIGINT', () => server.close(() => process.exit(0)));
