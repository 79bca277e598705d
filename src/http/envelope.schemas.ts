// The error envelope, declared once for the OpenAPI document and the serialization of error
// answers, and the error answers each route declares (docs/api.md, "Errors").
import { Type } from 'typebox';
import { errorStatus, type ErrorCode } from '../foundations/errors.ts';

export const ErrorEnvelope = Type.Object(
  {
    success: Type.Literal(0),
    error: Type.Object({
      code: Type.Enum(Object.keys(errorStatus) as ErrorCode[], {
        description: 'Stable machine-readable code; it alone decides the status. A later release may add codes: handle one you do not know by its status.',
        // A new code is not a breaking change (npm run check:api; docs/api.md, "Errors").
        'x-ugs-open-enum': true,
      }),
      message: Type.String({ description: 'What went wrong, for a human.' }),
      details: Type.Optional(
        Type.Array(
          Type.Object({
            field: Type.String({ description: 'The field, query parameter or header.' }),
            issue: Type.String({ description: 'What is wrong with it, e.g. too_long, unknown_field (docs/api.md, "Requests").' }),
          }),
          { description: 'One entry per problem, for validation_failed and ambiguous_request.' },
        ),
      ),
      request_id: Type.String({ description: 'Also sent as the X-Request-Id header; quote it when reporting a problem.' }),
    }),
  },
  { title: 'Error', description: 'Every failed request answers this, with success 0.' },
);

/**
 * The error answers of a route, by status, for the codes it can answer with; every route can
 * also answer internal_error, unavailable (a database outage, a shutdown) and storage_unavailable
 * (a full disk: a write, or a get-or-create that creates). The codes ride
 * along as `x-error-codes`, from which the OpenAPI document gets one example per code.
 */
export function errorResponses(...codes: ErrorCode[]): Record<number, unknown> {
  const all: ErrorCode[] = [...new Set<ErrorCode>([...codes, 'internal_error', 'unavailable', 'storage_unavailable'])];
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of all) byStatus.set(errorStatus[code], [...(byStatus.get(errorStatus[code]) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, list]) => [status, { ...ErrorEnvelope, 'x-error-codes': list, 'x-response-description': `Error: ${list.join(', ')}` }]),
  );
}

/** What any route behind an API token can answer before its own rules run. */
export const AUTH_ERRORS: ErrorCode[] = [
  'missing_api_token',
  'invalid_api_token',
  'wrong_token_kind',
  'insufficient_scope',
  'environment_forbidden',
  'rate_limited',
];
/** What a write of user groups or tags can answer on PostgreSQL when other requests hold what it needs (docs/api.md, "Errors"). */
export const LOCK_ERRORS: ErrorCode[] = ['lock_timeout'];
/** What any route that reads a JSON body can answer. */
export const BODY_ERRORS: ErrorCode[] = ['invalid_json', 'validation_failed', 'payload_too_large', 'unsupported_media_type', 'request_timeout'];
