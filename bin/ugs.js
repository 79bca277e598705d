#!/usr/bin/env node
// Runs the TypeScript command-line tool from a checkout (tsx compiles it on the fly).
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/ugs.ts');
