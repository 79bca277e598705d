// Each account's last write position, shared by every instance through Redis (docs/api.md,
// "Reads from replicas"): after a write transaction of an account commits, the primary's WAL
// position is recorded here for 30 s, and a read for that account goes to a replica only once
// the replica has replayed past it. A record only ever moves forward: the script keeps the
// larger of the stored and the new position (as fixed-width hex, wal-position.ts), so two
// instances recording out of order never take an account back in time.
import type { Redis } from 'ioredis';
import { withinRunningTime } from '../foundations/running-time-deadline.ts';
import { positionKey, positionOfKey } from './wal-position.ts';

/** How long an account's position is kept after its last write: longer than any lag a replica in use may have. */
export const WRITE_POSITION_TTL_MS = 30_000;
/**
 * A Redis command slower than this fails: the read goes to the primary (or, in an outage, answers
 * 503). Counted in the time this process ran (running-time-deadline.ts), not with ioredis's
 * commandTimeout: on a host starved of CPU that fired before the answer already received was read.
 */
const REDIS_COMMAND_TIMEOUT_MS = 250;
/** How long opening waits for Redis before serving without it (reads stay on the primary meanwhile). */
const REDIS_READY_WAIT_MS = 2000;

const RECORD_SCRIPT = `
local stored = redis.call('GET', KEYS[1])
if (not stored) or stored < ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0`;

export interface WritePositions {
  /** Records `position` for each account, unless a later one is recorded already. Rejects when Redis fails. */
  record(accountIds: Iterable<number>, position: bigint): Promise<void>;
  /** The position a replica must have replayed to serve the account (0 when it wrote nothing for 30 s). Rejects when Redis fails. */
  required(accountId: number): Promise<bigint>;
  close(): Promise<void>;
}

export async function openWritePositions(url: string, prefix: string, onError: (err: unknown) => void): Promise<WritePositions> {
  // Loaded only with a REDIS_URL: its modules were much of a start without one.
  const { Redis: RedisClient } = await import('ioredis');
  const redis: Redis = new RedisClient(url, {
    // As the rate limits' client (http/rate-limit.ts): fail at once while disconnected.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
  });
  redis.on('error', onError);
  redis.defineCommand('ugsRecordPosition', { numberOfKeys: 1, lua: RECORD_SCRIPT });
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, REDIS_READY_WAIT_MS);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  const keyOf = (accountId: number) => `${prefix}${accountId}`;
  const recordOne = (redis as unknown as { ugsRecordPosition(key: string, value: string, ttl: number): Promise<number> }).ugsRecordPosition.bind(redis);
  return {
    async record(accountIds, position) {
      const value = positionKey(position);
      const records = [...new Set(accountIds)].map((id) => recordOne(keyOf(id), value, WRITE_POSITION_TTL_MS));
      await withinRunningTime(Promise.all(records), REDIS_COMMAND_TIMEOUT_MS, 'Redis (recording a write position)');
    },
    async required(accountId) {
      const stored = await withinRunningTime(redis.get(keyOf(accountId)), REDIS_COMMAND_TIMEOUT_MS, 'Redis (reading a write position)');
      if (stored === null) return 0n;
      const position = positionOfKey(stored);
      if (position === null) throw new Error(`the write position of account ${accountId} in Redis is not one: "${stored.slice(0, 32)}"`);
      return position;
    },
    close: async () => {
      redis.disconnect();
    },
  };
}
