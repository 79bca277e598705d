// The server's open connections, so that a shutdown can end the ones that would otherwise
// hold it up: a client that stalls while sending its request (headers or body) keeps its
// connection busy, and Node's server.close() waits for every busy connection. Counted per
// connection, not per request: nothing here runs on the request path.
import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

interface Connections {
  /**
   * Destroys every connection that is not waiting for a response of ours: its request has
   * not fully arrived, or it is idle. Connections whose request is complete are left to
   * finish. Returns how many were destroyed.
   */
  closeUnanswerable(): number;
}

export function trackConnections(server: Server): Connections {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return {
    closeUnanswerable() {
      let closed = 0;
      for (const socket of sockets) {
        // The response Node is writing on this socket, if any (set from the request's arrival).
        const response = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
        if (response?.req.complete) continue;
        socket.destroy();
        closed++;
      }
      return closed;
    },
  };
}
