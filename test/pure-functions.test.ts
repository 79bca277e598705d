// Unit tests of small pure functions whose rules the HTTP suites reach only through long
// set-ups: the rate-limit counters the primary keeps for its workers
// (src/process/cluster/shared-rate-limits.ts), the separator of a CSV file to import
// (src/user-groups/transfer/import-csv.ts; docs/cli.md, "Import and export"), and the event ids (src/events/event-ids.ts;
// docs/api.md, "Change events").
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RateLimitCounters } from '../src/process/cluster/shared-rate-limits.ts';
import { delimiterOfHeader } from '../src/user-groups/transfer/import-csv.ts';
import { nextEventId } from '../src/events/event-ids.ts';

describe('rate-limit counters', () => {
  it('count a fixed window per key from its first request: the count so far and the ms left in the window', () => {
    const counters = new RateLimitCounters();
    assert.deepEqual(counters.count([['a', 1000, 2]], 10_000), [[1, 1000]]);
    assert.deepEqual(counters.count([['a', 1000, 2]], 10_400), [[2, 600]]);
    assert.deepEqual(counters.count([['a', 1000, 2]], 10_999), [[3, 1]], 'past the limit the count goes on: the store refuses on current > max');
  });

  it('a window that has ended starts again at the next request, with its own full length', () => {
    const counters = new RateLimitCounters();
    counters.count([['a', 1000, 5]], 0);
    counters.count([['a', 1000, 5]], 500);
    assert.deepEqual(counters.count([['a', 1000, 5]], 1000), [[1, 1000]], 'at the window’s end exactly, a new one');
    assert.deepEqual(counters.count([['a', 1000, 5]], 1999), [[2, 1]]);
  });

  it('keys are counted apart, and the checks of one batch in their order, a key twice in a batch counted twice', () => {
    const counters = new RateLimitCounters();
    assert.deepEqual(
      counters.count(
        [
          ['a', 1000, 5],
          ['b', 60_000, 5],
          ['a', 1000, 5],
        ],
        0,
      ),
      [
        [1, 1000],
        [1, 60_000],
        [2, 1000],
      ],
    );
  });
});

describe('the separator of a CSV file to import', () => {
  for (const [header, expected, why] of [
    ['user_group_id,name,properties', ',', 'commas'],
    ['user_group_id;name;properties', ';', 'semicolons'],
    ['user_group_id\tname\tproperties', '\t', 'tabs'],
    ['user_group_id', ',', 'one field: commas'],
    ['', ',', 'an empty header: commas'],
    ['user_group_id;name,properties', ',', 'a comma wins over semicolons'],
    ['user_group_id\tname;properties', ';', 'semicolons win over tabs'],
    ['user_group_id\tname,properties', ',', 'a comma wins over tabs'],
  ] as const) {
    it(`${why}: ${JSON.stringify(header)}`, () => assert.equal(delimiterOfHeader(header), expected));
  }
});

describe('event ids', () => {
  const at = '2026-01-02T03:04:05.678Z';
  const micros = Date.parse(at) * 1000;

  it('an id is the change’s time in microseconds since 1970 when the ids have not run ahead of it', () => {
    assert.equal(nextEventId(0, at), micros);
    assert.equal(nextEventId(micros - 1, at), micros);
  });

  it('within one millisecond, and after the clock went back, ids count on by one: never twice, never down', () => {
    assert.equal(nextEventId(micros, at), micros + 1);
    assert.equal(nextEventId(micros + 41, at), micros + 42);
    assert.equal(nextEventId(micros, '2025-01-01T00:00:00.000Z'), micros + 1);
  });

  it('a time that cannot be read, or past the year 2255 (not exact as a number), is not trusted: the id counts on', () => {
    assert.equal(nextEventId(7, 'not a time'), 8);
    assert.equal(nextEventId(7, '2300-01-01T00:00:00.000Z'), 8);
    assert.equal(nextEventId(0, '2255-01-01T00:00:00.000Z'), Date.parse('2255-01-01T00:00:00.000Z') * 1000);
  });
});
