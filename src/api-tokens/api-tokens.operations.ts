// API tokens over HTTP as the OpenAPI document describes them (docs/api.md, "API tokens over
// HTTP"), and their code samples.
import { apiTokenAccess } from '../auth/route-access.ts';
import { AUTH_ERRORS, BODY_ERRORS, errorResponses } from '../http/envelope.schemas.ts';
import type { CodeSample } from '../http/openapi.ts';
import * as schemas from './api-tokens.schemas.ts';

const tags = ['API tokens'];
const ADMIN = 'Needs an API token with the `admin` scope, and touches only its own account.';

export const listApiTokensOperation = {
  tags,
  operationId: 'listApiTokens',
  summary: "List the account's API tokens",
  description: `${ADMIN} Every token of the account, revoked and expired ones included, oldest first; never a token value.`,
  ...apiTokenAccess('admin', 'token', "managing the account's API tokens"),
  response: {
    200: { ...schemas.ApiTokenListResponse, 'x-response-description': "The account's API tokens." },
    ...errorResponses(...AUTH_ERRORS),
  },
};

export const currentApiTokenOperation = {
  tags,
  operationId: 'getCurrentApiToken',
  summary: 'The calling API token: its account, scopes and environments',
  description: 'Any valid API token may ask about itself (no scope needed), e.g. to show only the controls it may use. Never its value.',
  ...apiTokenAccess(null, 'none', 'reading the calling API token'),
  response: {
    200: { ...schemas.CurrentApiTokenResponse, 'x-response-description': 'The calling token and its account.' },
    ...errorResponses('missing_api_token', 'invalid_api_token', 'wrong_token_kind', 'rate_limited'),
  },
};

export const createApiTokenOperation = {
  tags,
  operationId: 'createApiToken',
  summary: 'Create an API token; its value is shown once',
  description: [
    ADMIN,
    'A token never grants more than the token that creates it: a scope it lacks is `403 insufficient_scope`;',
    'an environment restriction it has cannot be lifted or changed (`403 environment_forbidden`); and the new token cannot outlive it',
    '(`400 validation_failed` on `expires_in_seconds`). The value is in this answer only: the service keeps a hash. Audited as `api_token.issue`.',
  ].join(' '),
  ...apiTokenAccess('admin', 'request', "managing the account's API tokens"),
  body: schemas.CreateApiTokenBody,
  response: {
    201: { ...schemas.CreatedApiTokenResponse, 'x-response-description': 'The new token, with its value (shown once).' },
    ...errorResponses(...AUTH_ERRORS, ...BODY_ERRORS),
  },
};

export const revokeApiTokenOperation = {
  tags,
  operationId: 'revokeApiToken',
  summary: 'Revoke an API token',
  description: [
    ADMIN,
    'Every instance refuses the token within a second. A token of another account, or none, is `404 api_token_not_found`; one revoked before is `409 api_token_revoked`.',
    "The account's last active admin token cannot be revoked, by itself or another: `409 last_admin_token` (create another admin token first). Audited as `api_token.revoke`.",
  ].join(' '),
  ...apiTokenAccess('admin', 'token', "managing the account's API tokens"),
  params: schemas.ApiTokenIdParams,
  response: {
    200: { ...schemas.RevokedApiTokenResponse, 'x-response-description': 'The token, now revoked.' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed', 'api_token_not_found', 'api_token_revoked', 'last_admin_token'),
  },
};

export const apiTokenHistoryOperation = {
  tags,
  operationId: 'getApiTokenHistory',
  summary: "The issues and revocations of the account's API tokens",
  description: `${ADMIN} Newest first, each with the API token that acted (null for the command-line tool and the first start).`,
  ...apiTokenAccess('admin', 'token', "managing the account's API tokens"),
  querystring: schemas.ApiTokenHistoryQuery,
  response: {
    200: { ...schemas.ApiTokenHistoryResponse, 'x-response-description': 'The entries, newest first.' },
    ...errorResponses(...AUTH_ERRORS, 'validation_failed'),
  },
};

const client =
  "import { UserGroupServiceClient } from '@ugs/client';\nconst ugs = new UserGroupServiceClient({ baseUrl: process.env.UGS!, apiToken: process.env.ADMIN_TOKEN! });\n";

export const apiTokenCodeSamples: Record<string, CodeSample[]> = {
  listApiTokens: [
    { lang: 'Shell', label: 'curl', source: 'curl "$UGS/api/api_tokens" -H "Authorization: Token $ADMIN_TOKEN"' },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}const { api_tokens } = await ugs.listApiTokens();` },
  ],
  createApiToken: [
    {
      lang: 'Shell',
      label: 'curl',
      source:
        'curl -X POST "$UGS/api/api_tokens" -H "Authorization: Token $ADMIN_TOKEN" -H "Content-Type: application/json" \\\n  -d \'{"name": "reporting backend", "scopes": ["read"]}\'',
    },
    {
      lang: 'TypeScript',
      label: '@ugs/client',
      source: `${client}const { token, api_token } = await ugs.createApiToken({ name: 'reporting backend', scopes: ['read'] });`,
    },
  ],
  revokeApiToken: [
    { lang: 'Shell', label: 'curl', source: 'curl -X DELETE "$UGS/api/api_tokens/7" -H "Authorization: Token $ADMIN_TOKEN"' },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}await ugs.revokeApiToken(7);` },
  ],
  getCurrentApiToken: [
    { lang: 'Shell', label: 'curl', source: 'curl "$UGS/api/api_tokens/current" -H "Authorization: Token $TOKEN"' },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}const { account, api_token } = await ugs.getCurrentApiToken();` },
  ],
  getApiTokenHistory: [
    { lang: 'Shell', label: 'curl', source: 'curl "$UGS/api/api_tokens/history" -H "Authorization: Token $ADMIN_TOKEN"' },
    { lang: 'TypeScript', label: '@ugs/client', source: `${client}const { entries } = await ugs.getApiTokenHistory();` },
  ],
};
