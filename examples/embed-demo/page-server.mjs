// The embed demo's page server: stands for the web server of your front end. It serves a
// static page, on its own origin (port), that calls the user group service from the browser.
// The page's embed tokens come from @ugs/embed (packages/embed), bundled here for the browser.
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
const EMBED_PACKAGE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'packages', 'embed');

/**
 * @ugs/embed as one ES module: bundled from its source with esbuild (a development dependency
 * of the repository), or, without esbuild, its build (npm run build:embed), whose modules
 * import only each other.
 */
async function embedPackageModule() {
  try {
    const esbuild = await import('esbuild');
    const built = await esbuild.build({
      entryPoints: [path.join(EMBED_PACKAGE, 'src', 'index.ts')],
      bundle: true,
      format: 'esm',
      target: 'es2022',
      write: false,
      logLevel: 'silent',
    });
    return built.outputFiles[0].text;
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND') throw err;
    const dist = path.join(EMBED_PACKAGE, 'dist');
    if (!fs.existsSync(path.join(dist, 'index.js'))) throw new Error('neither esbuild nor packages/embed/dist: run npm install, or npm run build:embed');
    return null;
  }
}
const EMBED_BUNDLE = await embedPackageModule();

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
  if (req.method === 'GET' && pathname.startsWith('/embed/')) {
    // The package: one bundled module, or the files of its build.
    const name = pathname.slice('/embed/'.length);
    let text = null;
    if (EMBED_BUNDLE !== null) text = name === 'index.js' ? EMBED_BUNDLE : null;
    else if (/^[\w-]+\.js$/.test(name)) text = readIfThere(path.join(EMBED_PACKAGE, 'dist', name));
    res.writeHead(text === null ? 404 : 200, { 'content-type': text === null ? 'text/plain' : 'text/javascript; charset=utf-8', 'cache-control': 'no-store' });
    res.end(text ?? 'not found');
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

function readIfThere(file) {
  return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
}

server.listen(PORT, HOST, () => {
  const { port } = server.address();
  console.log(`embed demo page listening on http://${HOST}:${port} (backend ${BACKEND_URL}, data API ${DATA_API_URL ?? 'none'})`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
process.on('SIGINT', () => server.close(() => process.exit(0)));
