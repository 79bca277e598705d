// The container engine's command-line tools (docker, docker-compose), as the checks of the
// image and of compose.yaml drive them. .ci/container provides the engine and the base images.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { ROOT } from '../helpers/processes.ts';

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
  /** How long the command ran. */
  ms: number;
}

/**
 * The classic builder reads the Dockerfile as written; BuildKit would first fetch the frontend
 * its `# syntax=` line names from a registry, which CI cannot reach.
 */
const ENGINE_ENV = { DOCKER_BUILDKIT: '0', COMPOSE_DOCKER_CLI_BUILD: '0' };

export function runTool(command: string, args: string[], options: { env?: Record<string, string>; timeoutMs?: number } = {}): Promise<Finished> {
  const startedAt = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...ENGINE_ENV, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - startedAt });
    });
  });
}

export const docker = (...args: string[]): Promise<Finished> => runTool('docker', args);

/** The output of a docker command that must succeed. */
export async function dockerOutput(...args: string[]): Promise<string> {
  const { code, stdout, stderr } = await docker(...args);
  assert.equal(code, 0, `docker ${args.join(' ')}: ${stderr}`);
  return stdout.trim();
}

/** What the checks read of `docker container inspect`. */
export interface ContainerState {
  Name: string;
  Config: { User: string };
  State: { Running: boolean; ExitCode: number; Health?: { Status: string } };
  Mounts: { Type: string; Name: string; Destination: string }[];
}

/** What the checks read of `docker image inspect`. */
export interface ImageState {
  Size: number;
  Config: { Volumes: Record<string, object> | null; Labels: Record<string, string> | null };
}

/** `docker inspect` of one container or image, parsed. */
export async function inspect(kind: 'container', name: string): Promise<ContainerState>;
export async function inspect(kind: 'image', name: string): Promise<ImageState>;
export async function inspect(kind: 'container' | 'image', name: string): Promise<ContainerState | ImageState> {
  return JSON.parse(await dockerOutput(kind, 'inspect', name))[0];
}

/** A container's whole log so far, stdout and stderr together. */
export async function containerLogs(container: string): Promise<string> {
  const { stdout, stderr } = await docker('logs', container);
  return stdout + stderr;
}

/** The base URL of a container's port 3000 as published on the host's loopback. */
export async function publishedUrl(container: string, port = 3000): Promise<string> {
  const mapping = (await dockerOutput('port', container, `${port}/tcp`)).split('\n')[0];
  return `http://${mapping.replace(/^0\.0\.0\.0:/, '127.0.0.1:')}`;
}

/**
 * Polls `probe` until it gives a value, up to `boundMs` (generous: a loaded machine starts
 * containers slowly); fails naming `what`, with what `explain` says of the state then.
 */
export async function waitFor<T>(
  what: string,
  boundMs: number,
  probe: () => Promise<T | undefined>,
  explain: () => Promise<string> = async () => '',
): Promise<T> {
  const deadline = Date.now() + boundMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`${what}: not within ${boundMs / 1000} s\n${(await explain()).slice(-4000)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

export const FIRST_START_TOKEN = /ugs_api_[0-9A-Za-z]{49}/g;
