// Which databases the suite runs on: SQLite (a real file) always; PostgreSQL when
// TEST_POSTGRES_URL is set. Each test database is new and is dropped afterwards
// (scripts/scratch-database.ts), so runs never collide and leave nothing behind on the shared
// server.
import { createScratchDatabase, type Backend, type ScratchDatabase } from '../../scripts/scratch-database.ts';

export type { Backend };
export type TestDatabase = ScratchDatabase;

export const POSTGRES_URL = process.env.TEST_POSTGRES_URL || '';
export const BACKENDS: Backend[] = POSTGRES_URL ? ['sqlite', 'postgres'] : ['sqlite'];

export function createTestDatabase(backend: Backend): Promise<TestDatabase> {
  return createScratchDatabase(backend, { prefix: 'ugs_test', adminUrl: POSTGRES_URL });
}
