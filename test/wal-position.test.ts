// WAL positions as numbers and as the fixed-width text Redis compares (src/db/wal-position.ts):
// the order of the text is the order of the positions, which the record's script relies on.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { formatLsn, parseLsn, positionKey, positionOfKey, UNKNOWN_POSITION } from '../src/db/wal-position.ts';

describe('WAL positions', () => {
  it('parse pg_lsn text, and format it back', () => {
    assert.equal(parseLsn('0/0'), 0n);
    assert.equal(parseLsn('16/B374D848'), (0x16n << 32n) | 0xb374d848n);
    assert.equal(formatLsn(parseLsn('16/B374D848')!), '16/B374D848');
    for (const bad of ['', '16', '16/', '/1', 'G/1', '123456789/0', '1/2/3']) assert.equal(parseLsn(bad), null, bad);
  });

  it('their Redis text compares as the positions do, across the 32-bit boundary', () => {
    const positions = ['0/0', '0/FFFFFFFF', '1/0', '1/10', '9/0', 'A/0', 'FFFFFFFF/FFFFFFFF'].map((text) => parseLsn(text)!);
    const keys = positions.map(positionKey);
    assert.deepEqual([...keys].sort(), keys, 'sorted as text = sorted as numbers');
    for (const [i, key] of keys.entries()) assert.equal(positionOfKey(key), positions[i]);
    assert.equal(positionKey(UNKNOWN_POSITION), 'ffffffffffffffff');
    assert.ok(positionKey(UNKNOWN_POSITION) >= keys[keys.length - 1], 'no replica position passes the unknown one');
    assert.equal(positionOfKey('12'), null);
  });
});
