// GET /metrics for every worker of an instance together (docs/metrics.md, "Several workers"):
// the worker that gets the scrape asks the primary, which asks every worker for its series
// (getMetricsAsJSON) and adds them up with prom-client's cluster aggregation. Counters and
// histograms are summed; each gauge says how it combines (`aggregator`: summed unless it says
// otherwise).
//
// A sum of counters must never go down, or Prometheus takes it for a restart and counts the
// whole total again as new. So the primary keeps what each worker answered last, and when a
// worker is gone, its last counters and histograms stay in the sum: what it counted after
// that last scrape is lost, but the sum only grows. A worker too slow to answer a scrape is
// counted with what it answered last, for the same reason.
import { AggregatorRegistry, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { Channel } from './channel.ts';

export const METRICS_TEXT = 'metrics';
export const METRICS_SNAPSHOT = 'metrics-snapshot';

type Snapshot = MetricObjectWithValues<MetricValue<string>>[];

/** How long a scrape waits for a worker's series before it counts the ones it answered last. */
const SNAPSHOT_WAIT_MS = 3000;
/** What a worker waits for the primary's whole answer: longer than the primary waits for any one worker. */
export const METRICS_TEXT_WAIT_MS = SNAPSHOT_WAIT_MS + 2000;
/** The primary's own series that belong in the instance's totals: the CPU and memory it uses too. */
const PRIMARY_SERIES = new Set([
  'process_cpu_user_seconds_total',
  'process_cpu_system_seconds_total',
  'process_cpu_seconds_total',
  'process_resident_memory_bytes',
]);
const MONOTONIC = new Set(['counter', 'histogram']);

/** The primary's side. */
export class MetricsAcrossWorkers {
  /** What each worker answered last: the live ones', and, for those gone, their counters and histograms. */
  private readonly answers = new Map<number, Snapshot>();
  private readonly gone = new Set<number>();
  /** The sums of workers gone before the last scrape. */
  private retired: Snapshot = [];
  private folding: Promise<void> = Promise.resolve();
  private readonly own = new Registry();

  constructor() {
    collectDefaultMetrics({ register: this.own });
  }

  /** The Prometheus text for the workers serving now (id → channel) and those gone before them. */
  async text(serving: Map<number, Channel>): Promise<string> {
    this.folding = this.folding.then(() => this.foldGone());
    await this.folding;
    await Promise.all(
      [...serving].map(async ([id, channel]) => {
        try {
          const snapshot = await channel.request<Snapshot>(METRICS_SNAPSHOT, undefined, SNAPSHOT_WAIT_MS);
          if (!this.gone.has(id)) this.answers.set(id, snapshot);
        } catch {
          // Too slow, or gone meanwhile: counted with what it answered last.
        }
      }),
    );
    const own = (await this.own.getMetricsAsJSON()).filter((metric) => PRIMARY_SERIES.has(metric.name));
    return AggregatorRegistry.aggregate([...this.answers.values(), this.retired, own]).metrics();
  }

  /** A worker exited: what it counted until its last answer stays in the sums. */
  retire(id: number): void {
    const last = this.answers.get(id);
    if (!last) return;
    this.gone.add(id);
    // At run time a metric's type is its name ('counter'), whatever prom-client's typings say.
    this.answers.set(
      id,
      last.filter((metric) => MONOTONIC.has(String(metric.type))),
    );
  }

  /** Sums the workers gone into one: the sums stay the same, and the dead do not pile up. */
  private async foldGone(): Promise<void> {
    if (this.gone.size === 0) return;
    const ids = [...this.gone];
    const folded = (await AggregatorRegistry.aggregate([this.retired, ...ids.map((id) => this.answers.get(id)!)]).getMetricsAsJSON()) as Snapshot;
    for (const id of ids) {
      this.answers.delete(id);
      this.gone.delete(id);
    }
    this.retired = folded;
  }
}
