// A highly available PostgreSQL for a suite (scripts/ha-cluster.ts: etcd, two Patroni nodes in
// synchronous mode, HAProxy's read-write and read-only ports), started before its first test
// and stopped after its last, whatever happened in between. Without Debian's patroni,
// etcd-server and haproxy a suite skips loudly, except in CI (.ci/run installs them), where
// it fails.
import { after, before } from 'node:test';
import { haClusterMissing, startHaCluster, type HaCluster, type HaClusterOptions } from '../../scripts/ha-cluster.ts';

export type { HaCluster, HaNode, PatroniMember } from '../../scripts/ha-cluster.ts';

export const HA_MISSING = haClusterMissing();

/** The `skip` of a suite on the cluster: a sentence when the packages are missing here, outside CI. */
export const HA_SKIP: string | false = HA_MISSING && !process.env.CI ? `SKIPPED: ${HA_MISSING}` : false;

/** The cluster of the current describe: its `cluster` field is set by the before hook. */
export function useHaCluster(options: HaClusterOptions = {}): { cluster: HaCluster } {
  const holder = { cluster: undefined as unknown as HaCluster };
  before(async () => {
    holder.cluster = await startHaCluster({ keep: Boolean(process.env.UGS_HA_KEEP), ...options });
  });
  after(async () => {
    await holder.cluster?.stop();
  });
  return holder;
}
