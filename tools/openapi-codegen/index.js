// openapi-typescript, resolved from this workspace, where its TypeScript 5 lives.
export { default as openapiTS, astToString } from 'openapi-typescript';
