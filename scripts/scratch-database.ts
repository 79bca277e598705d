// A new database that its caller drops when done: a SQLite file in a temporary directory, or a
// PostgreSQL database created next to an existing one; empty, or a copy of another. The tests make theirs
// here (test/helpers/backends.ts), and so does the benchmark (bench/seed.ts), so that runs
// never collide and leave nothing behind on a shared server.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';

export type Backend = 'sqlite' | 'postgres';

export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

export interface DatabasePlace {
  /** Starts the database's name (PostgreSQL) or temporary directory (SQLite), to tell whose it is. */
  prefix: string;
  /** PostgreSQL: a database to connect to for creating and dropping; the new one is made next to it. */
  adminUrl?: string;
  /**
   * A database of the same backend to copy, files and planner statistics alike (tables grown
   * once, then opened by several suites): no connection may be open to it. PostgreSQL makes it
   * the new one's template; SQLite copies the file with its backup API.
   */
  copyOf?: string;
}

export async function createScratchDatabase(backend: Backend, { prefix, adminUrl, copyOf }: DatabasePlace): Promise<ScratchDatabase> {
  if (backend === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix.replaceAll('_', '-')}-`));
    const file = path.join(dir, 'ugs.sqlite');
    if (copyOf) {
      const source = new SQLite(copyOf.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
      try {
        await source.backup(file);
      } finally {
        source.close();
      }
    }
    return {
      url: `sqlite:${file}`,
      drop: async () => fs.rmSync(dir, { recursive: true, force: true }),
    };
  }
  if (!adminUrl) throw new Error('a PostgreSQL scratch database needs the URL of an existing database to create it next to');
  const name = `${prefix}_${process.pid}_${crypto.randomBytes(4).toString('hex')}`;
  // PostgreSQL waits up to 5 s for the template's last sessions to end before it refuses.
  await onConnection(adminUrl, `create database ${name}${copyOf ? ` template ${new URL(copyOf).pathname.slice(1)}` : ''}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => onConnection(adminUrl, `drop database if exists ${name} with (force)`),
  };
}

/** Runs one statement on a PostgreSQL connection of its own to `url` (a database cannot be dropped from a connection to it). */
export async function onConnection(url: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}
