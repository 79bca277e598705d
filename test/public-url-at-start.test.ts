// What the image does by default (HOST=0.0.0.0, no UGS_PUBLIC_URL): embed tokens would name an
// issuer no client can reach. The server says so at start, naming the `iss` it will put in them
// and how to set the right one. As a user meets it: the compiled server as a process.
import { describe, it, before, after } from 'node:test';
import { decodeJwt } from 'jose';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { httpRequest, issueTokenWithCli, spawnServer } from './helpers/processes.ts';

const WARNING = /UGS_PUBLIC_URL is not set/;

/** The server's JSON log lines at level warn. */
const warnings = (output: string) =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: number; msg: string; iss?: string })
    .filter((line) => line.level === 40);

describe('public URL at start', () => {
  let dir: string;
  let env: Record<string, string>;
  let apiToken: string;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-public-url-'));
    env = { DATABASE_URL: `sqlite:${path.join(dir, 'ugs.sqlite')}`, UGS_KEY_FILE: path.join(dir, 'secret.key'), UGS_SECRET_KEY: '', UGS_PUBLIC_URL: '' };
    apiToken = (await issueTokenWithCli(env)).token;
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('start: HOST=0.0.0.0 without UGS_PUBLIC_URL logs a warning naming the iss its embed tokens carry, and how to set UGS_PUBLIC_URL', async () => {
    const server = await spawnServer({ ...env, HOST: '0.0.0.0' });
    try {
      const [warning] = warnings(server.output()).filter((line) => WARNING.test(line.msg));
      assert.ok(warning, `a warning about UGS_PUBLIC_URL:\n${server.output()}`);
      assert.match(warning.msg, /Set UGS_PUBLIC_URL to the URL clients call this service at/);
      assert.match(warning.msg, /docker run -e UGS_PUBLIC_URL=/);

      assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token: apiToken, body: { user_group_id: 'g1' } })).status, 201);
      const issued = await httpRequest(server.baseUrl, 'POST', '/api/embed_token', { token: apiToken, body: { user_group_id: 'g1' } });
      assert.equal(issued.status, 200, issued.text);
      const { iss } = decodeJwt(issued.body.embed_token);
      assert.match(String(iss), /^http:\/\/0\.0\.0\.0:/);
      assert.equal(warning.iss, iss, 'the warning names the iss the tokens carry');
      assert.ok(warning.msg.includes(`iss "${iss}"`));
    } finally {
      await server.stop();
    }
  });

  it('start: with UGS_PUBLIC_URL set, or on the loopback HOST, there is no such warning', async () => {
    const starts: Record<string, string>[] = [{ HOST: '0.0.0.0', UGS_PUBLIC_URL: 'https://ugs.example.com' }, { HOST: '127.0.0.1' }];
    for (const extra of starts) {
      const server = await spawnServer({ ...env, ...extra });
      try {
        assert.equal((await httpRequest(server.baseUrl, 'GET', '/readyz')).status, 200);
        assert.doesNotMatch(server.output(), WARNING, JSON.stringify(extra));
      } finally {
        await server.stop();
      }
    }
  });
});
