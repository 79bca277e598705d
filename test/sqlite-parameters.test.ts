// SQLite statements run with `+?` parameters (src/db/sqlite-parameters.ts): written only outside
// quotes, and every value a statement binds comes back unchanged, with its type.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import SQLite from 'better-sqlite3';
import { withUnaryPlusParameters } from '../src/db/sqlite-parameters.ts';

describe('SQLite parameters written as unary plus', () => {
  it('sqlite parameters: every placeholder outside quotes becomes +?, none inside a string or a name', () => {
    assert.equal(withUnaryPlusParameters('select a from t where b = ? and c in (?, ?) limit ?'), 'select a from t where b = +? and c in (+?, +?) limit +?');
    assert.equal(
      withUnaryPlusParameters(`select 'what?', "odd?name" from t where x = ? and y = 'it''s ?'`),
      `select 'what?', "odd?name" from t where x = +? and y = 'it''s ?'`,
    );
  });

  it('sqlite parameters: every value comes back unchanged, with its type, and an index still finds the row', () => {
    const db = new SQLite(':memory:');
    try {
      db.exec('create table t (id integer primary key, k text unique, v)');
      const values: unknown[] = ['text', 42, 2 ** 53 - 1, 1.5, null, Buffer.from([0, 1, 255]), '42', ''];
      const echo = db.prepare(withUnaryPlusParameters('select ? as v, typeof(?) as type'));
      for (const value of values) {
        const plain = db.prepare('select ? as v, typeof(?) as type').get(value, value);
        assert.deepEqual(echo.get(value, value), plain, String(value));
      }
      db.prepare(withUnaryPlusParameters('insert into t (k, v) values (?, ?)')).run('key', 7n);
      assert.deepEqual(db.prepare(withUnaryPlusParameters('select v from t where k = ?')).get('key'), { v: 7 });
      const plan = db.prepare(`explain query plan ${withUnaryPlusParameters('select v from t where k = ?')}`).all('key') as { detail: string }[];
      assert.match(plan.map((row) => row.detail).join('\n'), /SEARCH t USING INDEX/);
    } finally {
      db.close();
    }
  });
});
