// Services the suites use when they are there (Redis): probed with a real command, and tried
// again before a suite skips. A loaded machine once made a one-second probe miss a Redis
// that was running, and the suite skipped as "no Redis".
import net from 'node:net';

/** Tries this many times, each answer awaited this long, with a pause between. */
const ATTEMPTS = 5;
const ANSWER_WITHIN_MS = 5000;
const PAUSE_MS = 1000;

/** One PING: true when Redis answers +PONG. */
function pingRedis(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port || 6379), hostname);
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    let reply = '';
    socket.setTimeout(ANSWER_WITHIN_MS);
    socket.on('connect', () => socket.write('*1\r\n$4\r\nPING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk;
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
    socket.on('error', () => done(false));
    socket.on('timeout', () => done(false));
  });
}

/** True when Redis at `url` answers a PING within a few attempts; false only after every one failed. */
export async function redisAnswers(url: string): Promise<boolean> {
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    if (await pingRedis(url)) return true;
    if (attempt < ATTEMPTS) await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
  }
  return false;
}
