// The test tiers (CONTRIBUTING.md, "Test tiers"): every file of test/*.test.ts is in exactly
// one of the three lists below, and test/tiers.test.ts fails when one is in none or in two, so
// a new file is placed when it is added. test/run-tests.ts runs a tier's files:
//
// - fast (`npm run test:fast`): pure functions, schemas, SQL snapshots and the routes through
//   Fastify's inject, on SQLite. No child process, no browser, no build: under a minute.
// - `npm test` (the fast files and the SERVICE ones): everything a change to the service can
//   break, on both backends when TEST_POSTGRES_URL is set: real server processes, the
//   command-line tool, the docs' examples.
// - slow (`npm run test:slow`): what a change to one route rarely breaks and costs minutes:
//   the upgrade from the last release, the release itself, the soak, Chromium, the container
//   files' engine, the verifiers customers run. CI runs it after `npm test` (.ci/run).

/** Pure functions, schemas, SQL snapshots, routes through inject on SQLite. */
export const FAST: readonly string[] = [
  'test/api-tokens.test.ts',
  'test/architecture.test.ts',
  'test/auth.test.ts',
  'test/authorization-matrix.test.ts',
  'test/background-loop.test.ts',
  'test/docs-citations.test.ts',
  'test/docs-cli.test.ts',
  'test/docs-client.test.ts',
  'test/docs-fields.test.ts',
  'test/docs-figures.test.ts',
  'test/docs-links.test.ts',
  'test/docs-measurements.test.ts',
  'test/embed-context.json.test.ts',
  'test/embed-jws.test.ts',
  'test/embed-revocation.test.ts',
  'test/embed-subject.test.ts',
  'test/embed-token.test.ts',
  'test/embed-viewer-attributes.test.ts',
  'test/embed-viewer.test.ts',
  'test/embed.test.ts',
  'test/end-of-turn.test.ts',
  'test/env-example.test.ts',
  'test/errors-and-headers.test.ts',
  'test/events-stream-reads.test.ts',
  'test/events.test.ts',
  'test/group-tags.test.ts',
  'test/hierarchy.test.ts',
  'test/history.test.ts',
  'test/hot-reads.test.ts',
  'test/internal-errors.test.ts',
  'test/openapi-document.test.ts',
  'test/openapi.test.ts',
  'test/pure-functions.test.ts',
  'test/route-access.test.ts',
  'test/sql-snapshots.test.ts',
  'test/sqlite-parameters.test.ts',
  'test/sqlite-write-line.test.ts',
  'test/sqlite-write-order.test.ts',
  'test/text-rules.test.ts',
  'test/tiers.test.ts',
  'test/token-format.test.ts',
  'test/transfer-round-trip.test.ts',
  'test/upsert-parts.test.ts',
  'test/user-groups.create.test.ts',
  'test/user-groups.get-or-create.test.ts',
  'test/user-groups.json.test.ts',
  'test/user-groups.list.test.ts',
  'test/user-groups.lookup.test.ts',
  'test/user-groups.rotate.test.ts',
  'test/user-groups.update-delete.test.ts',
  'test/user-groups.upsert.test.ts',
  'test/validation.test.ts',
  'test/verify-embed-tokens-doc.test.ts',
  'test/webhook-leases.test.ts',
  'test/webhook-limits.test.ts',
  'test/webhook-urls.test.ts',
  'test/db-errors.test.ts',
  'test/operations-coverage.test.ts',
  'test/wal-position.test.ts',
];

/** The rest of `npm test`: real processes and sockets, the tool, PostgreSQL's own suites, the docs' examples. */
export const SERVICE: readonly string[] = [
  'test/bootstrap.test.ts',
  'test/cli-backup.test.ts',
  'test/cli-import-export.test.ts',
  'test/cli-tags.test.ts',
  'test/cli.test.ts',
  'test/client.test.ts',
  'test/concurrency.test.ts',
  'test/console-bundle.test.ts',
  'test/crash.test.ts',
  'test/database-file.test.ts',
  'test/db-pool-size.test.ts',
  'test/durability-and-shutdown.test.ts',
  'test/error-hygiene.test.ts',
  'test/events-fairness.test.ts',
  'test/events-stream-limits.test.ts',
  'test/events-stream.test.ts',
  'test/files.test.ts',
  'test/fuzz.test.ts',
  'test/generated-client.test.ts',
  'test/group-tags-bound.test.ts',
  'test/group-tags-races.test.ts',
  'test/heavy-operations.test.ts',
  'test/hierarchy-races.test.ts',
  'test/http-layer.test.ts',
  'test/idempotency.test.ts',
  'test/instances.test.ts',
  'test/key-rotation.test.ts',
  'test/keys-cannot-split.test.ts',
  'test/log-stream.test.ts',
  'test/metrics.test.ts',
  'test/migrations.test.ts',
  'test/multi-instance.test.ts',
  'test/node-version.test.ts',
  'test/npm-run-dev.test.ts',
  'test/npm-start.test.ts',
  'test/pgbouncer.test.ts',
  'test/postgres-outage.test.ts',
  'test/postgres-rls.test.ts',
  'test/public-url-at-start.test.ts',
  'test/query-plans.test.ts',
  'test/rate-limit.test.ts',
  'test/readme.test.ts',
  'test/secret-keys-at-start.test.ts',
  'test/secrets-at-rest.test.ts',
  'test/sqlite-lock.test.ts',
  'test/storage-faults.test.ts',
  'test/tenant-isolation.test.ts',
  'test/test-runner.test.ts',
  'test/tracing.test.ts',
  'test/upsert-contention.test.ts',
  'test/upsert-lock-order.test.ts',
  'test/webhook-fairness.test.ts',
  'test/webhook-fan-out.test.ts',
  'test/webhooks.test.ts',
  'test/workers-writes.test.ts',
  'test/workers.test.ts',
  'test/embed-package.test.ts',
  'test/postgres-breaker.test.ts',
  'test/postgres-read-only.test.ts',
  'test/read-replica.test.ts',
];

/** Minutes each, and rarely broken by a change to a route: `npm run test:slow`, and CI. */
export const SLOW: readonly string[] = [
  // The last release's build, installed and upgraded from, with its data (helpers/previous-release.ts).
  'test/upgrade-history.test.ts',
  'test/upgrade-rollout.test.ts',
  // A release cut in a scratch clone, and the API against the last release's document.
  'test/release.test.ts',
  'test/check-api.test.ts',
  // The server under forced garbage collection for minutes, measuring its memory.
  'test/soak.test.ts',
  // Headless Chromium.
  'test/console.browser.test.ts',
  'test/docs-page.browser.test.ts',
  'test/embed-demo.browser.test.ts',
  'test/front-page.browser.test.ts',
  // PyJWT, golang-jwt (compiled) and the other verifiers customers run.
  'test/embed-interop.test.ts',
  // The client package packed and installed outside the repository (npm pack, npm install).
  'test/client-package.test.ts',
  'test/containers.test.ts',
  // A real Cube verifying embed tokens (examples/cube/), and a browser session through it.
  'test/cube.test.ts',
  'test/embed-session.browser.test.ts',
  // Stoplight Prism's validation proxy over every example of the docs.
  'test/prism.test.ts',
  // A highly available PostgreSQL (etcd, Patroni, HAProxy) failed over under load.
  'test/ha-failover.test.ts',
];

/**
 * Files of the slow tier that CI runs by themselves (.ci/run: after `npm test` and the rest of
 * the slow tier ran side by side). The failovers assert a goal, 99 % of page views answered
 * while the primary is away, that a machine kept at load 15 by the other lanes leaves at its
 * edge (99.2 % of a node loss's page views, one run): run alone, a red run means the service
 * missed it, not the machine. It also passes beside them (CONTRIBUTING.md, "Test tiers").
 */
export const ALONE_IN_CI: readonly string[] = ['test/ha-failover.test.ts'];

/**
 * Started first, in this order, the longest first (as measured: docs/performance.md, "The test suite"):
 * a run lasts at least as long as its longest file, so these start while the short files fill
 * the other places. The rest follow in name order.
 */
export const STARTS_FIRST: readonly string[] = [
  'test/query-plans.test.ts',
  'test/soak.test.ts',
  'test/keys-cannot-split.test.ts',
  'test/upgrade-history.test.ts',
  'test/instances.test.ts',
  'test/key-rotation.test.ts',
  'test/console.browser.test.ts',
  'test/readme.test.ts',
  'test/events-stream.test.ts',
  'test/docs-page.browser.test.ts',
  'test/cli-import-export.test.ts',
  'test/workers.test.ts',
  'test/cli.test.ts',
  'test/webhook-fan-out.test.ts',
  'test/log-stream.test.ts',
  'test/workers-writes.test.ts',
  'test/secret-keys-at-start.test.ts',
  'test/tenant-isolation.test.ts',
];

export type Tier = 'fast' | 'test' | 'slow';

/**
 * `concurrency`: files at once. `isolation`: 'process', each file in a process of its own; or
 * 'none', every file in the runner's own process, one test at a time: the fast files start
 * nothing, and loading the service's modules once instead of once per file is most of their time.
 */
export const TIERS: Record<Tier, { concurrency: number; isolation: 'process' | 'none'; sqliteOnly: boolean; files: () => string[] }> = {
  fast: { concurrency: 1, isolation: 'none', sqliteOnly: true, files: () => [...FAST] },
  test: { concurrency: 3, isolation: 'process', sqliteOnly: false, files: () => [...FAST, ...SERVICE] },
  // Several of these measure (the soak's memory) or drive Chromium: one at a time.
  slow: { concurrency: 1, isolation: 'process', sqliteOnly: false, files: () => [...SLOW] },
};

/** A tier's files in the order they start: STARTS_FIRST's, then the others by name. */
export function tierFiles(tier: Tier): string[] {
  const files = TIERS[tier].files().sort();
  const first = STARTS_FIRST.filter((file) => files.includes(file));
  return [...first, ...files.filter((file) => !first.includes(file))];
}
