// Event ids (docs/api.md, "Change events"): an account's events are numbered in the order the
// feed gives them, and no id is ever given out twice, even after the database lost the tail of
// its feed (a restore from a backup, a point-in-time recovery, a failover that lost its last
// commits). Nothing outside the database survives such a loss, so nothing in it can say which
// ids were given out before it. Instead an id is never below the time of its change, in
// microseconds since 1970: the changes made after a loss get ids above every id given out
// before it, as long as the ids had not run ahead of the clock (more than a million events a
// second in one account) and the clock was not set back. Within one millisecond they count on
// by one.
//
// The floor is the change's own time (occurred_at, written with it), not the time it is
// numbered: the events a backup holds but had not numbered yet are numbered after a restore
// exactly as the service numbered them before (the same rows, in the same order, after the
// same head), so their webhook-ids are the ones their receivers already have.
//
// Microseconds since 1970 stay below 2^53, exact in JSON and in JavaScript numbers, until the
// year 2255.

const MICROSECONDS_PER_MILLISECOND = 1000;

/** The id after `previous` for an event whose change occurred at `occurredAt` (ISO 8601). */
export function nextEventId(previous: number, occurredAt: string): number {
  const floor = Date.parse(occurredAt) * MICROSECONDS_PER_MILLISECOND;
  // A time so far off that the floor is not exact (past 2255, or unreadable) is not trusted.
  return Number.isSafeInteger(floor) && floor > previous ? floor : previous + 1;
}
