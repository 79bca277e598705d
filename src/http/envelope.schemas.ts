// The error envelope, declared once for the OpenAPI document and response serialization.
import { Type } from 'typebox';
import { errorStatus, type ErrorCode } from '../errors.ts';

export const ErrorEnvelope = Type.Object(
  {
    success: Type.Literal(0),
    error: Type.Object({
      code: Type.String({ description: 'Stable machine-readable code, e.g. validation_failed.' }),
      message: Type.String({ description: 'What went wrong, for a human.' }),
      details: Type.Optional(Type.Array(Type.Object({ field: Type.String(), issue: Type.String() }))),
      request_id: Type.String({ description: 'Also sent as the X-Request-Id header; quote it when reporting a problem.' }),
    }),
  },
  { examples: [{ success: 0, error: { code: 'validation_failed', message: 'user_group_id must be at most 256 characters', details: [{ field: 'user_group_id', issue: 'too_long' }], request_id: 'req_5f0c…' } }] },
);

/** Response schemas for the error statuses a route can answer with, by their codes. */
export function errorResponses(...codes: ErrorCode[]): Record<number, unknown> {
  const all: ErrorCode[] = [...codes, 'rate_limited', 'internal_error', 'unavailable'];
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of all) byStatus.set(errorStatus[code], [...(byStatus.get(errorStatus[code]) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, list]) => [status, { ...ErrorEnvelope, description: `Error: ${[...new Set(list)].join(', ')}` }]),
  );
}

export const AUTH_ERRORS: ErrorCode[] = ['missing_api_token', 'invalid_api_token', 'wrong_token_kind', 'insufficient_scope', 'environment_forbidden'];
export const BODY_ERRORS: ErrorCode[] = ['invalid_json', 'validation_failed', 'payload_too_large', 'unsupported_media_type'];
