// The top of the OpenAPI document; the paths come from the routes' own schemas.
export const openApiInfo = {
  openapi: '3.1.0',
  info: {
    title: 'User Group Service',
    version: '0.1.0',
    description: [
      'Creates and keeps a user group for each of your customers and hands out the user group token an embedded dashboard uses.',
      'Every response carries `success` (1 or 0) and an `X-Request-Id` header; errors carry `error.code`, `error.message` and `error.request_id`.',
      'Authenticate with `Authorization: Token <API token>` (issued with `npx ugs token create`).',
      'Unknown fields are refused (`400 validation_failed`); bodies are JSON objects of at most 256 KiB sent as `application/json`.',
    ].join('\n\n'),
  },
  components: {
    securitySchemes: {
      apiToken: {
        type: 'apiKey' as const,
        in: 'header' as const,
        name: 'Authorization',
        description: 'The value `Token <API token>`. API tokens start with `ugs_api_`.',
      },
      userGroupToken: {
        type: 'http' as const,
        scheme: 'bearer',
        description:
          'For the embed side, from the browser: `Authorization: Bearer <token>` with a user group token (`ugs_grp_…`) or a short-lived embed token (a JWS from `POST /api/embed_token`). Never accepted by the management API.',
      },
    },
  },
  tags: [
    { name: 'User groups', description: 'The management API, called from your backend.' },
    { name: 'Embed', description: 'What an embedded dashboard calls from the browser (CORS enabled), and the short-lived embed tokens your backend issues for it.' },
    { name: 'Operations', description: 'Health, readiness and the API description.' },
  ],
};

/** Shows the `x-get-body` of GET routes as their request body (see getBodyValidator). */
export function showGetBodies({ schema, url }: { schema: object; url: string }) {
  const fields = (schema ?? {}) as Record<string, unknown>;
  if (!fields['x-get-body']) return { schema, url };
  const { 'x-get-body': body, ...rest } = fields;
  return { schema: { ...rest, body }, url };
}
