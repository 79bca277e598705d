// The version this code is released as: package.json's, the one place it is written
// (docs/operations.md, "Releases"). `ugs --version`, GET /healthz, the OpenAPI document's
// info.version, the instance registry and the traces' service.version all say this.
import { createRequire } from 'node:module';

/** From src/foundations/ and from dist/foundations/ alike, package.json is two levels up. */
export const SERVICE_VERSION: string = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
