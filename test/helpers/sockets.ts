// What a server process did with one TCP connection, read from Linux's /proc: whether it still
// holds its end open. A test that hangs up must sometimes wait until the server has seen it
// (its socket closed) before it goes on; no log line or metric says so, and a fixed wait is
// either too short on a loaded machine or needlessly long on an idle one.
import fs from 'node:fs';

/** The inodes of the server-side sockets of `pid` whose peer is 127.0.0.1:`clientPort`. */
function serverSocketInodes(pid: number, clientPort: number): string[] {
  const inodes: string[] = [];
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      const remotePort = Number.parseInt(fields[2].split(':')[1], 16);
      if (remotePort === clientPort) inodes.push(fields[9]);
    }
  }
  return inodes;
}

/** True once process `pid` holds no socket of its connection with the client at local port `clientPort` (it closed its end). */
export function serverClosedConnection(pid: number, clientPort: number): boolean {
  const inodes = new Set(serverSocketInodes(pid, clientPort).map((inode) => `socket:[${inode}]`));
  if (inodes.size === 0) return true;
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (inodes.has(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))) return false;
    } catch {
      // closed meanwhile
    }
  }
  return true;
}
