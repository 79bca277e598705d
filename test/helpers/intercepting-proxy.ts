// A TCP proxy in front of PostgreSQL whose test decides, chunk by chunk, what passes: each
// chunk from the client (`toServer`) and from the server (`toClient`) is forwarded unless the
// test's function says otherwise, or closes the connection; `closeAll()` closes every
// connection open at that moment, so that the next request opens new ones.
import net from 'node:net';

/** What a chunk's function may do with its connection. */
export interface Connection {
  forward(chunk: Buffer, then?: () => void): void;
  /** Closes both sides; with `reset`, the client's with RST (a peer that died). */
  close(options?: { reset?: boolean }): void;
}

type OnChunk = (chunk: Buffer, connection: Connection) => void;

export async function startInterceptingProxy(target: URL, on: { toServer?: OnChunk; toClient?: OnChunk }) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => sockets.delete(socket));
    }
    const closer = (options: { reset?: boolean } = {}) => {
      if (options.reset) client.resetAndDestroy();
      else client.destroy();
      upstream.destroy();
    };
    const toServer: Connection = { forward: (chunk, then) => void upstream.write(chunk, then), close: closer };
    const toClient: Connection = { forward: (chunk, then) => void client.write(chunk, then), close: closer };
    client.on('data', (chunk: Buffer) => (on.toServer ? on.toServer(chunk, toServer) : toServer.forward(chunk)));
    upstream.on('data', (chunk: Buffer) => (on.toClient ? on.toClient(chunk, toClient) : toClient.forward(chunk)));
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  return {
    url: url.toString(),
    /** Closes every connection open now. */
    closeAll: () => {
      for (const socket of sockets) socket.destroy();
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
