// Token formats: recognisable prefixes, 256 random bits, and a checksum that lets a
// malformed token be refused without a database lookup.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend, startTestApp } from './helpers/harness.ts';
import { generateToken, tokenKind } from '../src/auth/token-format.ts';

describe('token formats', () => {
  it('API tokens and user group tokens have different, recognisable prefixes', () => {
    assert.match(generateToken('api'), /^ugs_api_[0-9A-Za-z]{49}$/);
    assert.match(generateToken('user_group'), /^ugs_grp_[0-9A-Za-z]{49}$/);
    assert.equal(tokenKind(generateToken('api')), 'api');
    assert.equal(tokenKind(generateToken('user_group')), 'user_group');
  });

  it('every single-character change of a token is caught by its checksum', () => {
    const token = generateToken('api');
    const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    for (let i = 'ugs_api_'.length; i < token.length; i++) {
      for (const c of alphabet) {
        if (c === token[i]) continue;
        const changed = token.slice(0, i) + c + token.slice(i + 1);
        assert.equal(tokenKind(changed), null, `change at ${i} to ${c} went unnoticed`);
      }
    }
  });

  it('a token truncated, extended or with a swapped prefix is refused', () => {
    const token = generateToken('user_group');
    assert.equal(tokenKind(token.slice(0, -1)), null);
    assert.equal(tokenKind(token + 'a'), null);
    assert.equal(tokenKind(token.replace('ugs_grp_', 'ugs_api_')), null);
  });

  it('tokens do not repeat (CSPRNG, 256 bits)', () => {
    const seen = new Set(Array.from({ length: 2000 }, () => generateToken('user_group')));
    assert.equal(seen.size, 2000);
  });
});

forEachBackend('malformed tokens never reach the database', (backend) => {
  it('with the database closed, a malformed token still gets 401 invalid_api_token while a well-formed unknown one needs the database', async () => {
    const t = await startTestApp(backend);
    const { token } = await t.issueToken();
    const mistyped = token.slice(0, -1) + (token.endsWith('a') ? 'b' : 'a');
    await t.handle.close(); // any lookup from now on fails
    try {
      const malformed = await t.request('GET', '/api/users', { token: mistyped });
      assert.equal(malformed.status, 401);
      assert.equal(malformed.body.error.code, 'invalid_api_token');
      const wellFormed = await t.request('GET', '/api/users', { token: generateToken('api') });
      assert.notEqual(wellFormed.status, 401, 'a well-formed token does go to the database, which is closed');
      assert.ok(wellFormed.status >= 500);
    } finally {
      await t.app.close();
      await t.close().catch(() => undefined);
    }
  });
});
