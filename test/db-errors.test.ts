// What each driver error means for a caller (src/db/errors.ts) and what the start says of the
// primary's commit settings (src/db/replication.ts): pure functions, tested without a database.
// The same errors met for real: test/postgres-read-only.test.ts, test/postgres-breaker.test.ts,
// test/postgres-outage.test.ts.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PrimaryUnreachable, isDatabaseUnavailable, isReadOnlyNode, isUnreachable, leavesPool, storageFault } from '../src/db/errors.ts';
import { durabilityOf } from '../src/db/replication.ts';

const pgError = (code: string, message = 'a server error') => Object.assign(new Error(message), { code });

describe('driver errors', () => {
  it('a node that cannot take writes (25006) is an outage that passes (503), and its connection leaves the pool; it does not open the breaker', () => {
    const readOnly = pgError('25006', 'cannot execute INSERT in a read-only transaction');
    assert.equal(isDatabaseUnavailable(readOnly), true);
    assert.equal(isReadOnlyNode(readOnly), true);
    assert.equal(leavesPool(readOnly), true);
    assert.equal(isUnreachable(readOnly), false, 'the node answers');
    assert.equal(storageFault(readOnly), undefined);
  });

  it('the open breaker is an outage (503)', () => {
    assert.equal(isDatabaseUnavailable(new PrimaryUnreachable()), true);
  });

  it('what opens the breaker: a connection refused, not answered in time, closed by a proxy, or a server starting, stopping or in recovery', () => {
    for (const err of [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      Object.assign(new Error('getaddrinfo ENOTFOUND db'), { code: 'ENOTFOUND' }),
      new Error('timeout expired'),
      new Error('Connection terminated due to connection timeout'),
      new Error('Connection terminated unexpectedly'),
      pgError('57P03', 'the database system is in recovery mode'),
      pgError('08006'),
    ]) {
      assert.equal(isUnreachable(err), true, err.message);
      assert.equal(isDatabaseUnavailable(err), true, err.message);
    }
  });

  it('what does not open it: a busy pool, too many connections, refused credentials, a missing database, a statement or lock timeout', () => {
    for (const err of [
      new Error('timeout exceeded when trying to connect'),
      pgError('53300', 'sorry, too many clients already'),
      pgError('28P01', 'password authentication failed'),
      pgError('3D000', 'database "x" does not exist'),
      pgError('57014', 'canceling statement due to statement timeout'),
      pgError('55P03', 'canceling statement due to lock timeout'),
    ])
      assert.equal(isUnreachable(err), false, err.message);
  });

  it('a connection that met contention or a constraint stays in the pool', () => {
    for (const code of ['23505', '40001', '40P01', '55P03', '57014']) assert.equal(leavesPool(pgError(code)), false, code);
  });
});

describe("the start's line on synchronous commit", () => {
  it('synchronous only with a standby named and synchronous_commit on, remote_apply or remote_write', () => {
    for (const synchronousCommit of ['on', 'remote_apply', 'remote_write'])
      assert.equal(durabilityOf({ synchronousCommit, synchronousStandbyNames: 'node2' }).synchronous, true, synchronousCommit);
    const sync = durabilityOf({ synchronousCommit: 'on', synchronousStandbyNames: '"node2"' });
    assert.match(sync.message, /commits synchronously.*survives the loss of the primary's node/);
    for (const [synchronousCommit, synchronousStandbyNames] of [
      ['on', ''],
      ['local', 'node2'],
      ['off', 'node2'],
      ['remote_apply', '  '],
    ])
      assert.equal(durabilityOf({ synchronousCommit, synchronousStandbyNames }).synchronous, false, `${synchronousCommit} / ${synchronousStandbyNames}`);
  });

  it('not synchronous: says what an acknowledged write survives, and warns when even a crash of PostgreSQL may lose it', () => {
    const plain = durabilityOf({ synchronousCommit: 'on', synchronousStandbyNames: '' });
    assert.equal(plain.level, 'info');
    assert.match(plain.message, /does not commit synchronously.*survives a crash of PostgreSQL.*not the loss of the primary's node/);
    const off = durabilityOf({ synchronousCommit: 'off', synchronousStandbyNames: '' });
    assert.equal(off.level, 'warn');
    assert.match(off.message, /may be lost even when PostgreSQL itself crashes/);
  });
});
