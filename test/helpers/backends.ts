// Which databases the suite runs on: SQLite (a real file) always; PostgreSQL when
// TEST_POSTGRES_URL is set. Each test database is new and is dropped afterwards, so runs
// never collide and leave nothing behind on the shared server. The benchmark makes its
// database here too (bench/seed.ts), under its own prefix.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

export type Backend = 'sqlite' | 'postgres';

export const POSTGRES_URL = process.env.TEST_POSTGRES_URL || '';
export const BACKENDS: Backend[] = POSTGRES_URL ? ['sqlite', 'postgres'] : ['sqlite'];

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

export interface DatabasePlace {
  /** Starts the database's name (PostgreSQL) or temporary directory (SQLite), to tell whose it is. */
  prefix?: string;
  /** A PostgreSQL database to connect to for creating and dropping; the new one is made next to it. */
  adminUrl?: string;
}

export async function createTestDatabase(
  backend: Backend,
  { prefix = 'ugs_test', adminUrl = POSTGRES_URL }: DatabasePlace = {},
): Promise<TestDatabase> {
  if (backend === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${prefix.replaceAll('_', '-')}-`));
    return {
      url: `sqlite:${path.join(dir, 'ugs.sqlite')}`,
      drop: async () => fs.rmSync(dir, { recursive: true, force: true }),
    };
  }
  const name = `${prefix}_${process.pid}_${crypto.randomBytes(4).toString('hex')}`;
  await onAdminConnection(adminUrl, `create database ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => onAdminConnection(adminUrl, `drop database if exists ${name} with (force)`),
  };
}

/** Runs one statement on a connection of its own (a database cannot be dropped from a connection to it). */
async function onAdminConnection(adminUrl: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}
