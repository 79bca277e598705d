// Work the service does on its own, for no request: the event sequencer, the webhook
// dispatcher, the idempotency sweeper. Each runs inside `backgroundWork.run(name, …)`, so
// that what it sends can be told apart from what a request sends (the tenant-isolation
// suite checks every statement a request sends; a background pass names each account in
// what it writes, but reads every account's rows).
import { AsyncLocalStorage } from 'node:async_hooks';

export const backgroundWork = new AsyncLocalStorage<string>();
