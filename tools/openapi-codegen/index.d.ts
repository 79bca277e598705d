export { default as openapiTS, astToString } from 'openapi-typescript';
