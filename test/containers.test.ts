// The Dockerfile and compose.yaml as files, checked on every `npm test` (no container engine
// needed): the image installs with exactly the production commands of docs/deployment.md (which
// test/production/ runs), on the Node.js major of .nvmrc, runs as an unprivileged user with a
// health check, and compose, read with a YAML parser as compose reads it, stops instances with a
// grace period longer than their shutdown timeout. CI also builds and runs both
// (test/containers/, .ci/container).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { ROOT } from './helpers/processes.ts';
import { productionInstallCommands } from './helpers/production-install.ts';

const dockerfile = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const composeText = fs.readFileSync(path.join(ROOT, 'compose.yaml'), 'utf8');

interface ComposeService {
  build?: string;
  image?: string;
  environment?: Record<string, string>;
  ports?: string[];
  stop_grace_period?: string;
}
/** Instructions with their continuation lines joined. */
const instructions = dockerfile
  .replace(/\\\n\s*/g, ' ')
  .split('\n')
  .filter((line) => /^[A-Z]+\s/.test(line));

describe('container files', () => {
  it('Dockerfile: builds with exactly the production commands of docs/deployment.md, in the build stage, on the Node.js of .nvmrc', () => {
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

  it("Dockerfile: the image's org.opencontainers.image.version label is package.json's version, in the final stage", () => {
    const final = instructions.slice(instructions.map((line) => line.startsWith('FROM ')).lastIndexOf(true));
    const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const labels = final.filter((line) => line.startsWith('LABEL ')).join(' ');
    assert.match(labels, new RegExp(`org\\.opencontainers\\.image\\.version="${version.replaceAll('.', '\\.')}"`), labels);
  });

  it('compose.yaml: YAML that parses (merge keys as compose reads them), with PostgreSQL, Redis and two instances of this build', () => {
    // strict: a plain value holding ": " (line 15 once had one) is an error here, as in compose.
    const compose = parse(composeText, { merge: true, strict: true, prettyErrors: true }) as { services: Record<string, ComposeService> };
    assert.deepEqual(Object.keys(compose.services).sort(), ['postgres', 'redis', 'ugs-1', 'ugs-2']);
    for (const name of ['ugs-1', 'ugs-2']) {
      const service = compose.services[name];
      assert.equal(service.build, '.', name);
      assert.match(service.environment?.DATABASE_URL ?? '', /^postgres:\/\/[^@]+@postgres:5432\//, name);
      assert.match(service.environment?.REDIS_URL ?? '', /^redis:\/\/redis:6379/, name);
      assert.match(service.environment?.UGS_SECRET_KEY ?? '', /^\$\{UGS_SECRET_KEY:\?.+\}$/, `${name}: UGS_SECRET_KEY is required, with a message`);
      assert.ok(service.environment?.UGS_PUBLIC_URL, `${name} sets UGS_PUBLIC_URL`);
      const grace = Number(/^(\d+)s$/.exec(service.stop_grace_period ?? '')?.[1]);
      const shutdown = Number(service.environment?.UGS_SHUTDOWN_TIMEOUT_MS);
      assert.ok(grace * 1000 > shutdown + 2000, `${name}: grace ${grace} s, shutdown ${shutdown} ms`);
      assert.equal(service.ports?.length, 1, name);
    }
    assert.match(compose.services.postgres.image ?? '', /^postgres:/);
    assert.match(compose.services.redis.image ?? '', /^redis:/);
  });

  it('docs/deployment.md: the docker run example sets UGS_PUBLIC_URL, mounts a volume on /app/data and stops with a grace period', () => {
    const deployment = fs.readFileSync(path.join(ROOT, 'docs/deployment.md'), 'utf8');
    const run = /^docker run (?:[^\n]*\\\n)*[^\n]*/m.exec(deployment)?.[0] ?? '';
    assert.match(run, /-e UGS_PUBLIC_URL=\S+/, run);
    assert.match(run, /-v \S+:\/app\/data/, run);
    assert.match(deployment, /^docker stop -t 15 /m);
  });
});
