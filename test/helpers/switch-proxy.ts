// A TCP proxy in front of a database that the test switches between three states: `forward`
// (the database is there), `hold` (what HAProxy does with no primary: it accepts a connection
// and never answers, until a server is back, then hands it on) and `refuse` (nothing listens on
// the port). It counts the connections it accepted, and the most it held at once.
import net from 'node:net';

export type ProxyMode = 'forward' | 'hold' | 'refuse';

export interface SwitchProxy {
  port: number;
  mode(): ProxyMode;
  /** Drops every open connection and holds the new ones (accepted, never answered). */
  hold(): Promise<void>;
  /** Drops every open connection and stops listening: connections are refused. */
  refuse(): Promise<void>;
  /** Forwards again: the connections held meanwhile are handed on to the database, and new ones too. */
  forward(): Promise<void>;
  /** Connections accepted since the start. */
  accepted(): number;
  /** The most connections accepted since the last resetHeldMax() that were held at once (those accepted before it not counted). */
  heldMax(): number;
  /** Connections held now. */
  heldNow(): number;
  resetHeldMax(): void;
  close(): Promise<void>;
}

export async function startSwitchProxy(targetHost: string, targetPort: number): Promise<SwitchProxy> {
  let current: ProxyMode = 'forward';
  let accepted = 0;
  let heldMax = 0;
  let mark = 0;
  const open = new Set<net.Socket>();
  const held = new Set<net.Socket>();
  /** The number each held connection was accepted as. */
  const numbers = new WeakMap<net.Socket, number>();
  const heldSinceMark = () => [...held].filter((socket) => (numbers.get(socket) ?? 0) > mark).length;

  const pipeToDatabase = (client: net.Socket) => {
    const upstream = net.connect(targetPort, targetHost);
    open.add(upstream);
    upstream.on('close', () => open.delete(upstream));
    upstream.on('error', () => upstream.destroy());
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.resume();
  };

  const onConnection = (client: net.Socket) => {
    accepted++;
    open.add(client);
    client.on('close', () => {
      open.delete(client);
      held.delete(client);
    });
    client.on('error', () => client.destroy());
    if (current === 'forward') return pipeToDatabase(client);
    // Held: nothing is read, so what the client sends waits in the socket until it is forwarded.
    client.pause();
    held.add(client);
    numbers.set(client, accepted);
    heldMax = Math.max(heldMax, heldSinceMark());
  };

  let server = net.createServer({ pauseOnConnect: true }, onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;

  const dropAll = () => {
    for (const socket of open) socket.destroy();
    held.clear();
  };
  const listen = async () => {
    if (server.listening) return;
    server = net.createServer({ pauseOnConnect: true }, onConnection);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
  };
  const stopListening = () => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));

  return {
    port,
    mode: () => current,
    async hold() {
      current = 'hold';
      dropAll();
      await listen();
    },
    async refuse() {
      current = 'refuse';
      dropAll();
      await stopListening();
    },
    async forward() {
      current = 'forward';
      await listen();
      for (const client of [...held]) {
        held.delete(client);
        pipeToDatabase(client);
      }
    },
    accepted: () => accepted,
    heldMax: () => heldMax,
    heldNow: () => held.size,
    resetHeldMax() {
      mark = accepted;
      heldMax = 0;
    },
    async close() {
      dropAll();
      await stopListening();
    },
  };
}
