// The tag set under races (docs/api.md, "Tags"), with two real server processes on one
// database (two instances on PostgreSQL; two processes on one SQLite file), renaming and
// deleting in small batches (UGS_TAG_BATCH_SIZE=7) while PUTs replace the tags of the same
// groups: each group ends as some order of the operations would leave it (a PUT is never
// overwritten by a batch that read the group before it, and no tag comes back), and the set
// lists exactly the tags the groups carry, with their counts.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { forEachBackend } from './helpers/harness.ts';
import { httpRequest, useServerProcesses } from './helpers/processes.ts';
import { retryingLockWaits } from './helpers/lock-waits.ts';

const ROUNDS = 4;
const GROUPS = 60;

type Tags = readonly string[];
const sorted = (tags: Iterable<string>) => [...new Set(tags)].sort();
const renamed = (from: string, to: string) => (tags: Tags) => (tags.includes(from) ? sorted([...tags.filter((tag) => tag !== from), to]) : [...tags]);
const without = (gone: string) => (tags: Tags) => tags.filter((tag) => tag !== gone);
/** Every value `start` can reach by applying the operations any number of times, in any order. */
function reachable(start: Tags, operations: ((tags: Tags) => Tags)[]): Set<string> {
  const seen = new Set([JSON.stringify(sorted(start))]);
  const queue = [sorted(start)];
  while (queue.length > 0) {
    const tags = queue.pop()!;
    for (const operation of operations) {
      const next = JSON.stringify(sorted(operation(tags)));
      if (!seen.has(next)) {
        seen.add(next);
        queue.push(JSON.parse(next));
      }
    }
  }
  return seen;
}

forEachBackend('tags under races across two server processes', (backend) => {
  const two = useServerProcesses(backend, { env: { UGS_TAG_BATCH_SIZE: '7' } });
  const { on } = two;

  async function createGroups(prefix: string, initial: (i: number) => string[]) {
    const res = await httpRequest(on(0), 'POST', '/api/users/upsert', {
      token: two.token,
      body: { user_groups: Array.from({ length: GROUPS }, (_, i) => ({ user_group_id: `${prefix}${i}`, group_tags: initial(i) })) },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.counts.created, GROUPS, res.text);
  }

  /** Every group of the round, by its index, as the service answers it. */
  async function tagsOfGroups(prefix: string): Promise<string[][]> {
    const res = await httpRequest(on(1), 'GET', `/api/users?q=${encodeURIComponent(prefix)}&limit=500`, { token: two.token });
    assert.equal(res.status, 200, res.text);
    const tags: string[][] = [];
    for (const group of res.body.user_groups) tags[Number(group.provided_id.slice(prefix.length))] = group.group_tags;
    assert.equal(Object.keys(tags).length, GROUPS);
    return tags;
  }

  /** The set as listed (the round's tags), against what the groups carry: same counts, and a tag with no group only where `mayBeEmpty` says. */
  async function assertSetMatchesGroups(prefix: string, groups: string[][], mayBeEmpty: (tag: string) => boolean) {
    const res = await httpRequest(on(0), 'GET', `/api/group_tags?q=${encodeURIComponent(prefix)}&limit=500`, { token: two.token });
    assert.equal(res.status, 200, res.text);
    const listed = new Map(res.body.group_tags.map((tag) => [tag.name, tag.user_group_count]));
    const carried = new Map<string, number>();
    for (const tags of groups) for (const tag of tags) carried.set(tag, (carried.get(tag) ?? 0) + 1);
    for (const [tag, count] of carried) assert.equal(listed.get(tag), count, `${tag}: carried by ${count} groups, listed ${listed.get(tag)}`);
    for (const [tag, count] of listed) {
      if (!carried.has(tag)) assert.ok(count === 0 && mayBeEmpty(tag), `${tag} is listed with ${count} groups, but no group carries it`);
    }
  }

  it(`tags under races: a rename and a delete in batches, and PUTs that replace the same groups' tags, on two instances: each group ends as some order of them leaves it, and no tag is lost or comes back (${ROUNDS} rounds)`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const prefix = `r${round}-`;
      const [old, fresh, gone, other] = ['old', 'new', 'gone', 'other'].map((name) => `${prefix}${name}`);
      const initial = (i: number) => [[old, gone], [old], [gone], [other]][i % 4];
      // Every other group gets a PUT, with one of these.
      const choices = [[old, other], [other], [gone, fresh], [old], [], [old, gone]];
      const putOf = (i: number) => (i % 2 === 0 ? choices[(i / 2 + round) % choices.length] : undefined);
      await createGroups(prefix, initial);

      const puts = Array.from({ length: GROUPS }, (_, i) => i)
        .filter((i) => putOf(i) !== undefined)
        // A PUT that waited for the batches' locks past the lock timeout is sent again (lock-waits.ts): a later PUT, which the orders below allow.
        .map((i) =>
          retryingLockWaits(() =>
            httpRequest(on(i / 2), 'PUT', '/api/user', { token: two.token, body: { user_group_id: `${prefix}${i}`, group_tags: putOf(i) } }),
          ),
        );
      const [rename, remove, ...answers] = await Promise.all([
        httpRequest(on(round), 'POST', '/api/group_tags/rename', { token: two.token, body: { name: old, new_name: fresh } }),
        httpRequest(on(round + 1), 'DELETE', `/api/group_tags?name=${encodeURIComponent(gone)}`, { token: two.token }),
        ...puts,
      ]);
      assert.equal(rename.status, 200, rename.text);
      assert.equal(remove.status, 200, remove.text);
      for (const answer of answers) assert.equal(answer.status, 200, answer.text);

      const groups = await tagsOfGroups(prefix);
      const rename1 = renamed(old, fresh);
      const delete1 = without(gone);
      for (let i = 0; i < GROUPS; i++) {
        const put = putOf(i);
        // Without a PUT, both operations reach the group; with one, those after it do.
        const allowed = put === undefined ? new Set([JSON.stringify(sorted(rename1(delete1(initial(i)))))]) : reachable(put, [rename1, delete1]);
        assert.ok(
          allowed.has(JSON.stringify(groups[i])),
          `round ${round}, group ${i} (PUT ${JSON.stringify(put)}): ${JSON.stringify(groups[i])} is none of ${[...allowed].join(' ')}`,
        );
      }
      // The old name and the deleted tag are gone unless a PUT after the operation put them back on a group; the new name stays.
      await assertSetMatchesGroups(prefix, groups, (tag) => tag === fresh || tag === other);
    }
  });

  it(`tags under races: two renames in opposite directions and PUTs at once, on two instances, both finish; every tag a group carries is in the set with its count (${ROUNDS} rounds)`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const prefix = `pp${round}-`;
      const [a, b, other] = ['a', 'b', 'other'].map((name) => `${prefix}${name}`);
      const initial = (i: number) => [[a], [b], [a, b], [other, a]][i % 4];
      const choices = [[a], [b, other], [], [a, b]];
      const putOf = (i: number) => (i % 3 === 0 ? choices[(i / 3 + round) % choices.length] : undefined);
      await createGroups(prefix, initial);

      const puts = Array.from({ length: GROUPS }, (_, i) => i)
        .filter((i) => putOf(i) !== undefined)
        .map((i) =>
          retryingLockWaits(() => httpRequest(on(i), 'PUT', '/api/user', { token: two.token, body: { user_group_id: `${prefix}${i}`, group_tags: putOf(i) } })),
        );
      const [forth, back, ...answers] = await Promise.all([
        httpRequest(on(round), 'POST', '/api/group_tags/rename', { token: two.token, body: { name: a, new_name: b } }),
        httpRequest(on(round + 1), 'POST', '/api/group_tags/rename', { token: two.token, body: { name: b, new_name: a } }),
        ...puts,
      ]);
      assert.equal(forth.status, 200, forth.text);
      assert.equal(back.status, 200, back.text);
      for (const answer of answers) assert.equal(answer.status, 200, answer.text);

      const groups = await tagsOfGroups(prefix);
      const operations = [renamed(a, b), renamed(b, a)];
      for (let i = 0; i < GROUPS; i++) {
        const allowed = reachable(putOf(i) ?? initial(i), operations);
        assert.ok(allowed.has(JSON.stringify(groups[i])), `round ${round}, group ${i}: ${JSON.stringify(groups[i])} is none of ${[...allowed].join(' ')}`);
      }
      // Each rename's last batch takes its old name out of the set once no group carries it; the new name stays, with 0 if the other rename took its groups.
      await assertSetMatchesGroups(prefix, groups, (tag) => tag === a || tag === b || tag === other);
    }
  });
});
