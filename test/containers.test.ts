// The Dockerfile and compose.yaml cannot be built here (no container engine), so this holds
// them to what is tested: the image installs with exactly the README's production commands
// (which test/production/ runs), on the Node.js major of .nvmrc, runs as an unprivileged user
// with a health check, and compose stops instances with a grace period longer than their
// shutdown timeout.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';
import { productionInstallCommands } from './helpers/production-install.ts';

const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const compose = fs.readFileSync(path.join(ROOT, 'compose.yaml'), 'utf8');
/** Instructions with their continuation lines joined. */
const instructions = dockerfile
  .replace(/\\\n\s*/g, ' ')
  .split('\n')
  .filter((line) => /^[A-Z]+\s/.test(line));

describe('container files', () => {
  it('Dockerfile: builds with exactly the README production commands, in the build stage, on the Node.js of .nvmrc', () => {
    assert.ok(instructions.includes(`RUN ${productionInstallCommands().join(' && ')}`), `a RUN of: ${productionInstallCommands().join(' && ')}`);
    const bases = instructions.filter((line) => line.startsWith('FROM '));
    assert.ok(bases.length >= 2, 'multi-stage');
    const major = fs.readFileSync(path.join(ROOT, '.nvmrc'), 'utf8').trim();
    for (const base of bases) assert.match(base, new RegExp(`^FROM node:${major}-`), base);
    assert.ok(
      !instructions.some(
        (line) => /^ENV\b.*NODE_ENV=production/.test(line) && instructions.indexOf(line) < instructions.findIndex((l) => l.startsWith('RUN npm ci')),
      ),
      'npm ci does not run with NODE_ENV=production',
    );
  });

  it('Dockerfile: the final stage runs as a user other than root, with a health check on /healthz and the server as its command', () => {
    const final = instructions.slice(instructions.map((line) => line.startsWith('FROM ')).lastIndexOf(true));
    const user = final.filter((line) => line.startsWith('USER ')).at(-1);
    assert.ok(user && !/^USER (root|0)\b/.test(user), `USER in the final stage: ${user}`);
    assert.ok(final.some((line) => line.startsWith('HEALTHCHECK ') && line.includes('/healthz')));
    assert.ok(final.includes('CMD ["node", "dist/server.js"]'));
  });

  it('compose.yaml: PostgreSQL, Redis and two instances, stopped with a grace period longer than their shutdown timeout', () => {
    for (const service of ['ugs-1:', 'ugs-2:', 'postgres:', 'redis:']) assert.match(compose, new RegExp(`^  ${service}`, 'm'), service);
    const grace = Number(/stop_grace_period: (\d+)s/.exec(compose)?.[1]);
    const shutdown = Number(/UGS_SHUTDOWN_TIMEOUT_MS: "(\d+)"/.exec(compose)?.[1]);
    assert.ok(grace * 1000 > shutdown + 2000, `grace ${grace} s, shutdown ${shutdown} ms`);
    assert.match(compose, /DATABASE_URL: postgres:\/\//);
    assert.match(compose, /REDIS_URL: redis:\/\//);
  });
});
