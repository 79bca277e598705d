// Revocation that reaches offline verifiers (docs/verify-embed-tokens.md, "Refusing revoked
// tokens offline"): a verifier checks an embed token with jose against the JWKS, and the
// client package's EmbedRevocationList, following the event stream, refuses it once its
// group is deleted or its token rotated; as the service does, a grace period keeps the
// group's old token working, never its embed tokens.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { forEachBackend, useTestApp, createGroup, testConfig } from './helpers/harness.ts';
import { EmbedRevocationList, type EmbedRevocation } from '../packages/client/src/index.ts';
import { GENEROUS_WAIT_MS } from './helpers/wait.ts';

/** Polls `check` until it gives a non-null answer (generously); the answer, or null. */
async function eventually(check: () => EmbedRevocation | null): Promise<EmbedRevocation | null> {
  const deadline = Date.now() + GENEROUS_WAIT_MS;
  for (;;) {
    const answer = check();
    if (answer !== null || Date.now() > deadline) return answer;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

forEachBackend('embed tokens: revocation for offline verifiers', (backend) => {
  const t = useTestApp(backend);
  let baseUrl: string;
  let list: EmbedRevocationList;
  let token: string;
  let earlyToken: string;

  before(async () => {
    baseUrl = await t.app.listen({ host: '127.0.0.1', port: 0 });
    ({ token } = await t.issueToken({ account: 'verifier' }));
    // A group rotated before the list started: the feed it reads first has it.
    const early = await createGroup(t, { user_group_id: 'rotated-early' }, token);
    const earlyEmbed = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'rotated-early' } });
    assert.equal((await t.request('POST', '/api/user', { token, body: { current_token: early.token } })).status, 200);
    earlyToken = earlyEmbed.body.embed_token;
    list = new EmbedRevocationList({ baseUrl, apiToken: token, reconnectDelayMs: 100 });
    await list.ready;
  });
  after(() => list?.close());

  /** Verifies offline: the signature and claims with jose and the JWKS, then the revocation list. */
  async function verify(embedToken: string): Promise<{ sub: unknown; revoked: EmbedRevocation | null }> {
    const keys = createRemoteJWKSet(new URL(`${baseUrl}/.well-known/jwks.json`));
    const { payload } = await jwtVerify(embedToken, keys, {
      issuer: testConfig().publicUrl,
      audience: testConfig().embedAudience,
      algorithms: ['ES256', 'RS256', 'EdDSA'],
      requiredClaims: ['exp', 'nbf'],
    });
    return { sub: payload.sub, revoked: list.check(payload) };
  }

  async function embedTokenOf(id: string): Promise<{ group: { token: string }; embed: string }> {
    const group = await createGroup(t, { user_group_id: id }, token);
    const res = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: id } });
    assert.equal(res.status, 200, res.text);
    return { group, embed: res.body.embed_token };
  }

  it('revocation: a token rotated before the list started is refused', async () => {
    // The rotation committed before the list started; its event may reach the feed a moment
    // later (the sequencer numbers it after commit), and then comes on the stream.
    await verify(earlyToken); // the signature and claims hold: only the list knows
    assert.equal(await eventually(() => list.check(decode(earlyToken))), 'token_rotated');
  });

  it('revocation: an embed token verifies offline and is accepted; once its group is deleted, it is refused', async () => {
    const { embed } = await embedTokenOf('to-delete');
    const accepted = await verify(embed);
    assert.equal(accepted.sub, 'verifier:Customer:to-delete');
    assert.equal(accepted.revoked, null);
    assert.equal((await t.request('DELETE', '/api/user', { token, query: { user_group_id: 'to-delete' } })).status, 200);
    assert.equal(await eventually(() => list.check(decode(embed))), 'group_deleted');
    const stillSigned = await verify(embed);
    assert.equal(stillSigned.revoked, 'group_deleted', 'the signature still verifies: only the list knows');
  });

  it('revocation: a rotation without grace refuses the older generation; a new embed token of the group is accepted', async () => {
    const { group, embed } = await embedTokenOf('to-rotate');
    assert.equal((await verify(embed)).revoked, null);
    const rotated = await t.request('POST', '/api/user', { token, body: { current_token: group.token } });
    assert.equal(rotated.status, 200);
    assert.equal(await eventually(() => list.check(decode(embed))), 'token_rotated');
    const fresh = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'to-rotate' } });
    assert.equal((await verify(fresh.body.embed_token)).revoked, null);
  });

  it("revocation: a token that names a viewer ends with its group's rotation offline too; the same viewer's new token is accepted", async () => {
    const group = await createGroup(t, { user_group_id: 'viewer-rotate' }, token);
    const viewer = { id: 'ada', attributes: { region: 'emea' } };
    const issued = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'viewer-rotate', viewer } });
    assert.equal(issued.status, 200, issued.text);
    const accepted = await verify(issued.body.embed_token);
    assert.deepEqual([accepted.sub, accepted.revoked], ['verifier:Customer:viewer-rotate', null]);
    assert.equal((await t.request('POST', '/api/user', { token, body: { current_token: group.token } })).status, 200);
    assert.equal(await eventually(() => list.check(decode(issued.body.embed_token))), 'token_rotated');
    const fresh = await t.request('POST', '/api/embed_token', { token, body: { user_group_id: 'viewer-rotate', viewer } });
    assert.equal((await verify(fresh.body.embed_token)).revoked, null);
    assert.deepEqual(decode(fresh.body.embed_token).ugs_viewer, viewer);
  });

  it('revocation: with a grace period too, as the service itself refuses the older embed tokens at once', async () => {
    const { group, embed } = await embedTokenOf('to-rotate-with-grace');
    const rotated = await t.request('POST', '/api/user', { token, body: { current_token: group.token, grace_period_seconds: 600 } });
    assert.equal(rotated.status, 200);
    assert.equal(await eventually(() => list.check(decode(embed))), 'token_rotated');
    // The service agrees: the embed context refuses the token.
    const context = await t.request('GET', '/api/embed/context', { bearer: embed });
    assert.equal(context.status, 401, context.text);
  });
});

function decode(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString());
}
