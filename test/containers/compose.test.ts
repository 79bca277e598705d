// compose.yaml as a self-hoster runs it (docs/deployment.md, "Containers"): read by compose itself, brought
// up (two instances, PostgreSQL, Redis), a write through one instance read through the other,
// then stopped. Needs an engine, docker-compose and base images, so it is not part of `npm test`:
// .ci/container provides them (PostgreSQL and Redis as stand-ins from Debian's packages, under
// the names compose.yaml gives) and runs this file with test/containers/image.test.ts (their
// builds share their layers: the second finds them cached).
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { httpRequest } from '../helpers/processes.ts';
import { FIRST_START_TOKEN, docker, inspect, runTool, waitFor } from './engine.ts';

const project = `ugsci${process.pid}`;

/** A port nothing listens on now, for compose to publish an instance on. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

describe('compose.yaml', () => {
  const env: Record<string, string> = { UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
  const compose = (args: string[], options: { env?: Record<string, string>; timeoutMs?: number } = {}) =>
    runTool('docker-compose', ['-p', project, '-f', 'compose.yaml', ...args], { env: { ...env, ...options.env }, timeoutMs: options.timeoutMs });
  const logs = async () => {
    const { stdout, stderr } = await compose(['logs', '--no-color']);
    return stdout + stderr;
  };
  let urls: string[] = [];
  after(async () => {
    await compose(['down', '--volumes', '--rmi', 'local', '--remove-orphans'], { timeoutMs: 180_000 });
  });

  it('compose.yaml: compose reads it, and without UGS_SECRET_KEY it refuses with the message that says how to make one', async () => {
    const config = await compose(['config', '--quiet']);
    assert.equal(config.code, 0, config.stderr);
    const missing = await compose(['config', '--quiet'], { env: { UGS_SECRET_KEY: '' } });
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /set UGS_SECRET_KEY: openssl rand -base64 32/);
  });

  it('compose.yaml: docker-compose up --build brings both instances up on PostgreSQL and Redis, ready', async () => {
    Object.assign(env, { UGS_1_PORT: String(await freePort()), UGS_2_PORT: String(await freePort()) });
    urls = [`http://127.0.0.1:${env.UGS_1_PORT}`, `http://127.0.0.1:${env.UGS_2_PORT}`];
    const up = await compose(['up', '--detach', '--build'], { timeoutMs: 900_000 });
    assert.equal(up.code, 0, `${up.stdout.slice(-3000)}\n${up.stderr.slice(-3000)}`);
    for (const url of urls) {
      await waitFor(`${url}/readyz`, 180_000, async () => ((await httpRequest(url, 'GET', '/readyz')).status === 200 ? true : undefined), logs);
    }
    const startLog = await logs();
    assert.match(startLog, /"database":"postgres:\/\/ugs:[^"]*@postgres:5432\/ugs"/, 'on PostgreSQL');
    assert.doesNotMatch(startLog, /rate limit store \(Redis\) (unreachable|failed)/, 'Redis answers');
  });

  it('compose.yaml: one first-start token for the stack, and a write through one instance is read through the other', async () => {
    const tokens = (await logs()).match(FIRST_START_TOKEN) ?? [];
    assert.equal(new Set(tokens).size, 1, 'exactly one instance printed the first API token');
    const token = tokens[0];
    const created = await httpRequest(urls[0], 'POST', '/api/user', { token, body: { user_group_id: 'compose-1', name: 'Through ugs-1' } });
    assert.equal(created.status, 201, created.text);
    const read = await httpRequest(urls[1], 'GET', '/api/user?user_group_id=compose-1', { token });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.new_user_group, false);
    assert.equal(read.body.user_group.team_id, created.body.user_group.team_id);
    assert.equal(read.body.user_group.token, created.body.user_group.token, 'the other instance opens the stored token with the same UGS_SECRET_KEY');
  });

  it('compose.yaml: docker-compose stop exits 0, and every container of the stack ended with status 0', async () => {
    const containers = (await compose(['ps', '--quiet'])).stdout.trim().split('\n').filter(Boolean);
    assert.equal(containers.length, 4, 'ugs-1, ugs-2, postgres and redis');
    const stop = await compose(['stop'], { timeoutMs: 180_000 });
    assert.equal(stop.code, 0, stop.stderr);
    for (const id of containers) {
      const { Name, State } = await inspect('container', id);
      assert.equal(State.Running, false, Name);
      assert.equal(State.ExitCode, 0, `${Name} ended with ${State.ExitCode}:\n${(await docker('logs', '--tail', '20', id)).stderr}`);
    }
  });
});
