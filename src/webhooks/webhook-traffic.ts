// What one instance sends to webhook receivers at once, and over which connections
// (docs/security.md, "Webhooks"): a receiver that never answers holds a request for up to the
// attempt timeout, so one account's hanging receivers must not hold what another's deliveries
// need.
//
// - Slots: at most `total` endpoints are worked on at once, at most `perAccount` of one
//   account (its deliveries and its test events together), and one test event per endpoint.
//   An endpoint's deliveries go one at a time anyway (head of line, under its lease).
// - Connections: every endpoint has HTTP agents of its own (keep-alive, two sockets: its
//   delivery and a test event). A shared agent's per-host pool let one account's hanging
//   requests queue another account's behind them when both sent to one host.
// Per instance, in memory: they bound this process's sockets and requests; the database holds
// what must hold across instances (the leases).
import http from 'node:http';
import https from 'node:https';

export interface TrafficLimits {
  /** UGS_WEBHOOK_CONCURRENCY: endpoints one instance works on at once. */
  total: number;
  /** UGS_WEBHOOK_ACCOUNT_CONCURRENCY: of them, one account's (test events included). */
  perAccount: number;
}

/** Agents kept for endpoints with nothing in flight; beyond it, the oldest idle ones are closed. */
const IDLE_AGENTS_KEPT = 256;

interface EndpointAgents {
  'http:': http.Agent;
  'https:': https.Agent;
}

export class WebhookTraffic {
  private inFlight = 0;
  private readonly byAccount = new Map<number, number>();
  private readonly testing = new Set<number>();
  /** By endpoint id, least recently used first. */
  private readonly agents = new Map<number, EndpointAgents>();

  constructor(readonly limits: TrafficLimits) {}

  /** Endpoints the instance may still start working on. */
  get free(): number {
    return Math.max(0, this.limits.total - this.inFlight);
  }

  /** The accounts that have all the slots they may have. */
  accountsAtLimit(): number[] {
    return [...this.byAccount].filter(([, count]) => count >= this.limits.perAccount).map(([accountId]) => accountId);
  }

  /** A slot to work on one of the account's endpoints: its release, or undefined when the instance or the account has none free. */
  take(accountId: number): (() => void) | undefined {
    const used = this.byAccount.get(accountId) ?? 0;
    if (this.inFlight >= this.limits.total || used >= this.limits.perAccount) return undefined;
    this.inFlight++;
    this.byAccount.set(accountId, used + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inFlight--;
      const left = (this.byAccount.get(accountId) ?? 1) - 1;
      if (left > 0) this.byAccount.set(accountId, left);
      else this.byAccount.delete(accountId);
    };
  }

  /** A slot for one test event to the endpoint: as `take`, and one test at a time per endpoint. */
  takeForTest(accountId: number, endpointId: number): (() => void) | undefined {
    if (this.testing.has(endpointId)) return undefined;
    const release = this.take(accountId);
    if (!release) return undefined;
    this.testing.add(endpointId);
    return () => {
      this.testing.delete(endpointId);
      release();
    };
  }

  /** The endpoint's own agent for the URL's protocol. */
  agentFor(endpointId: number, protocol: string): http.Agent {
    let agents = this.agents.get(endpointId);
    if (agents)
      this.agents.delete(endpointId); // re-inserted below: most recently used last
    else {
      const options = { keepAlive: true, maxSockets: 2, maxFreeSockets: 1 };
      agents = { 'http:': new http.Agent(options), 'https:': new https.Agent(options) };
      this.closeIdleBeyond(IDLE_AGENTS_KEPT);
    }
    this.agents.set(endpointId, agents);
    return agents[protocol === 'https:' ? 'https:' : 'http:'];
  }

  /** Closes every kept connection (shutdown). */
  close(): void {
    this.closeIdleBeyond(0);
  }

  private closeIdleBeyond(kept: number): void {
    for (const [endpointId, agents] of this.agents) {
      if (this.agents.size <= kept) return;
      const busy = Object.values(agents).some((agent: http.Agent) => Object.values(agent.sockets).some((sockets) => (sockets?.length ?? 0) > 0));
      if (busy) continue;
      for (const agent of Object.values(agents) as http.Agent[]) agent.destroy();
      this.agents.delete(endpointId);
    }
  }
}
