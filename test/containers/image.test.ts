// The image as a self-hoster builds and runs it (docs/deployment.md, "Containers"), on a real container
// engine: built from the Dockerfile as it is, started on a volume, called, stopped, and started
// again on the same volume as an upgrade does. Needs an engine and base images, so it is not part
// of `npm test`: .ci/container provides them and runs this file.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, httpRequest } from '../helpers/processes.ts';
import { FIRST_START_TOKEN, containerLogs, docker, dockerOutput, inspect, publishedUrl, runTool, waitFor } from './engine.ts';

const IMAGE = 'ugs-ci/ugs:test';
const name = `ugs-ci-${process.pid}`;
const volume = `${name}-data`;
/** `docker stop`'s grace period, as docs/deployment.md and docs/operations.md say to set it. */
const GRACE_S = 15;
const PUBLIC_URL = 'https://ugs.example.com';

/** Starts a container of the image as docs/deployment.md shows: port published, data on the volume. */
async function start(container: string, env: Record<string, string>, options: { volume?: string } = {}): Promise<string> {
  const args = ['run', '-d', '--name', container, '-p', '127.0.0.1::3000'];
  if (options.volume) args.push('-v', `${options.volume}:/app/data`);
  for (const [key, value] of Object.entries(env)) args.push('-e', `${key}=${value}`);
  await dockerOutput(...args, IMAGE);
  const baseUrl = await publishedUrl(container);
  await waitFor(
    `${container} serves /readyz`,
    60_000,
    async () => ((await httpRequest(baseUrl, 'GET', '/readyz')).status === 200 ? true : undefined),
    () => containerLogs(container),
  );
  return baseUrl;
}

describe('the container image', () => {
  const containers: string[] = [];
  const track = (container: string) => (containers.push(container), container);
  after(async () => {
    for (const container of containers) await docker('rm', '-f', '-v', container);
    await docker('volume', 'rm', '-f', volume);
  });

  let first = { baseUrl: '', token: '' };
  let created: Record<string, unknown> = {};

  it('image: the Dockerfile builds as it is, and docs/deployment.md states its size and what it adds to its base within 10%', async () => {
    const build = await runTool('docker', ['build', '-t', IMAGE, '.'], { timeoutMs: 900_000 });
    assert.equal(build.code, 0, `${build.stdout.slice(-4000)}\n${build.stderr.slice(-4000)}`);
    const image = await inspect('image', IMAGE);
    const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    assert.equal(image.Config.Labels?.['org.opencontainers.image.version'], version, "the image's version label is package.json's");
    const size = image.Size / 1e6;
    const base = /^FROM (\S+)/m.exec(fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'))![1];
    const added = size - (await inspect('image', base)).Size / 1e6;
    console.log(`image: ${size.toFixed(0)} MB, of which ${added.toFixed(0)} MB on top of ${base}; built in ${Math.round(build.ms / 1000)} s`);
    const deployment = fs.readFileSync(path.join(ROOT, 'docs/deployment.md'), 'utf8');
    const stated = Number(/image is about (\d+) MB/.exec(deployment)?.[1]);
    const statedAdded = Number(/adds to its base[^.]*? about (\d+) MB/.exec(deployment)?.[1]);
    assert.ok(Math.abs(stated - size) <= size * 0.1, `docs/deployment.md says the image is about ${stated} MB; it is ${size.toFixed(0)} MB`);
    assert.ok(
      Math.abs(statedAdded - added) <= added * 0.1,
      `docs/deployment.md says the Dockerfile adds about ${statedAdded} MB; it adds ${added.toFixed(0)} MB`,
    );
  });

  it('image: runs as the unprivileged node user, with its data on the volume mounted at /app/data', async () => {
    await dockerOutput('volume', 'create', volume);
    const container = track(`${name}-1`);
    const baseUrl = await start(container, { UGS_PUBLIC_URL: PUBLIC_URL }, { volume });
    const config = await inspect('container', container);
    assert.equal(config.Config.User, 'node');
    assert.notEqual(await dockerOutput('exec', container, 'id', '-u'), '0');
    assert.ok('/app/data' in ((await inspect('image', IMAGE)).Config.Volumes ?? {}), 'the image declares /app/data a volume');
    const mount = config.Mounts.find((m) => m.Destination === '/app/data');
    assert.equal(mount?.Type, 'volume');
    assert.equal(mount?.Name, volume);
    assert.equal(
      await dockerOutput('exec', container, 'stat', '-c', '%n %U', '/app/data/ugs.sqlite', '/app/data/secret.key'),
      '/app/data/ugs.sqlite node\n/app/data/secret.key node',
    );
    assert.equal(await dockerOutput('exec', container, 'stat', '-c', '%a', '/app/data/secret.key'), '600');
    const token = (await containerLogs(container)).match(FIRST_START_TOKEN)?.[0];
    assert.ok(token, 'the first start printed an API token in the log');
    first = { baseUrl, token };
  });

  it('image: /healthz and /readyz answer, the README first call works with the token from the log, and the engine reports it healthy', async () => {
    const { baseUrl, token } = first;
    assert.equal((await httpRequest(baseUrl, 'GET', '/healthz')).status, 200);
    assert.equal((await httpRequest(baseUrl, 'GET', '/readyz')).status, 200);
    const answer = await httpRequest(baseUrl, 'GET', '/api/user?user_group_id=example_1&name=Example%201', { token });
    assert.equal(answer.status, 201, answer.text);
    assert.equal(answer.body.user_group.name, 'Example 1');
    created = answer.body.user_group;
    // The HEALTHCHECK runs inside the image (node -e fetch …): the engine must see it pass.
    await waitFor('docker reports the container healthy', 90_000, async () =>
      (await inspect('container', `${name}-1`)).State.Health?.Status === 'healthy' ? true : undefined,
    );
    assert.doesNotMatch(await containerLogs(`${name}-1`), /UGS_PUBLIC_URL is not set/, 'no warning when UGS_PUBLIC_URL is set');
  });

  it('image: the command-line tool works inside the container as docs/deployment.md shows it (docker exec … ugs token list --account default)', async () => {
    const deployment = fs.readFileSync(path.join(ROOT, 'docs/deployment.md'), 'utf8');
    assert.ok(deployment.includes('docker exec ugs ugs token list --account default'), 'docs/deployment.md shows the command');
    const listed = await docker('exec', `${name}-1`, 'ugs', 'token', 'list', '--account', 'default', '--json');
    assert.equal(listed.code, 0, listed.stderr);
    const tokens = JSON.parse(listed.stdout) as { token_start: string; name: string | null }[];
    assert.equal(tokens.length, 1);
    assert.ok(first.token.startsWith(tokens[0].token_start), 'the first-start token is listed');
    const plain = await docker('exec', `${name}-1`, 'ugs', 'token', 'list', '--account', 'default');
    assert.equal(plain.code, 0, plain.stderr);
    assert.doesNotMatch(plain.stdout + plain.stderr, FIRST_START_TOKEN, 'never the token itself');
  });

  it(`image: docker stop ends it within the ${GRACE_S} s grace period, with exit code 0 and the server's last log line`, async () => {
    const stop = await docker('stop', '-t', String(GRACE_S), `${name}-1`);
    assert.equal(stop.code, 0, stop.stderr);
    assert.ok(stop.ms < GRACE_S * 1000, `docker stop took ${stop.ms} ms`);
    assert.equal((await inspect('container', `${name}-1`)).State.ExitCode, 0);
    assert.match(await containerLogs(`${name}-1`), /"msg":"stopped"/);
  });

  it('image: a new container on the same volume (an upgrade) keeps the data, the token and the key, and prints no new first-start token', async () => {
    const container = track(`${name}-2`);
    const baseUrl = await start(container, { UGS_PUBLIC_URL: PUBLIC_URL }, { volume });
    assert.doesNotMatch(await containerLogs(container), FIRST_START_TOKEN);
    const again = await httpRequest(baseUrl, 'GET', '/api/user?user_group_id=example_1', { token: first.token });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.new_user_group, false);
    assert.equal(again.body.user_group.team_id, created.team_id);
    assert.equal(again.body.user_group.token, created.token, 'the stored group token still opens with the key on the volume');
    assert.equal((await docker('stop', '-t', String(GRACE_S), container)).code, 0);
  });

  it('image: started without UGS_PUBLIC_URL, it logs a warning naming the iss its embed tokens carry and how to set it', async () => {
    const container = track(`${name}-3`);
    await start(container, {});
    const logs = await containerLogs(container);
    assert.match(logs, /UGS_PUBLIC_URL is not set/);
    assert.match(logs, /http:\/\/0\.0\.0\.0:3000/);
    assert.equal((await docker('stop', '-t', String(GRACE_S), container)).code, 0);
  });
});
