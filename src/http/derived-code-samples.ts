// The code samples of an operation that its feature gives none (docs/architecture.md, "Adding an
// operation"), derived from what the operation declares: its method and path, the token its
// security requirement names, and each required parameter and body field, valued from its
// schema's examples. The TypeScript sample calls the @ugs/client method named as the
// operationId (test/operations-coverage.test.ts holds the client to that).

/** A code sample as reference renderers read it (CodeSample of openapi.ts, which imports this file). */
interface CodeSample {
  lang: string;
  label: string;
  source: string;
}

type Json = Record<string, unknown>;
interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  example?: unknown;
  schema?: Json;
}

const CLIENT =
  "import { UserGroupServiceClient } from '@ugs/client';\nconst ugs = new UserGroupServiceClient({ baseUrl: process.env.UGS!, apiToken: process.env.TOKEN! });\n";

/** A value for a required parameter or field: its example, else one its schema says is valid. */
function exampleOf(where: string, schema: Json | undefined, example: unknown, schemas: Json): unknown {
  const resolved = (typeof schema?.$ref === 'string' ? schemas[schema.$ref.split('/').pop()!] : schema) as Json | undefined;
  const examples = resolved?.examples as unknown[] | undefined;
  if (example !== undefined) return example;
  if (examples?.length) return examples[0];
  if (resolved?.example !== undefined) return resolved.example;
  if (Array.isArray(resolved?.enum)) return resolved.enum[0];
  if (resolved?.type === 'integer' || resolved?.type === 'number') return resolved.minimum ?? 1;
  if (resolved?.type === 'boolean') return true;
  for (const branch of (resolved?.anyOf as Json[] | undefined) ?? []) {
    try {
      return exampleOf(where, branch, undefined, schemas);
    } catch {
      // the next branch may have one
    }
  }
  throw new Error(
    `${where} is required and has no example: give its schema \`examples\`, from which its code samples are derived (src/http/derived-code-samples.ts)`,
  );
}

/** curl and @ugs/client samples of one operation of the document. */
export function derivedCodeSamples(path: string, method: string, operation: Json, schemas: Json): CodeSample[] {
  const name = `${method.toUpperCase()} ${path} (${String(operation.operationId)})`;
  const parameters = ((operation.parameters as Parameter[] | undefined) ?? []).filter((p) => p.required);
  const valued = (p: Parameter) => [p.name, exampleOf(`${name}: the ${p.in} parameter ${p.name}`, p.schema, p.example, schemas)] as const;
  const pathValues = parameters.filter((p) => p.in === 'path').map(valued);
  const query = parameters.filter((p) => p.in === 'query').map(valued);
  const declaredBody = ((operation.requestBody as Json | undefined)?.content as Record<string, Json> | undefined)?.['application/json']?.schema as
    | Json
    | undefined;
  const bodySchema = typeof declaredBody?.$ref === 'string' ? (schemas[declaredBody.$ref.split('/').pop()!] as Json) : declaredBody;
  const required = (bodySchema?.required as string[] | undefined) ?? [];
  const properties = (bodySchema?.properties as Record<string, Json> | undefined) ?? {};
  const body = required.map((field) => [field, exampleOf(`${name}: the body's field ${field}`, properties[field], undefined, schemas)] as const);

  let url = path;
  for (const [parameter, value] of pathValues) url = url.replace(`{${parameter}}`, encodeURIComponent(String(value)));
  if (query.length > 0) url += `?${new URLSearchParams(query.map(([key, value]) => [key, String(value)])).toString()}`;
  const security = (operation.security as Record<string, string[]>[] | undefined)?.[0] ?? {};
  const auth =
    'apiToken' in security ? ' -H "Authorization: Token $TOKEN"' : 'userGroupOrEmbedToken' in security ? ' -H "Authorization: Bearer $GROUP_TOKEN"' : '';
  const verb = method === 'get' ? '' : ` -X ${method.toUpperCase()}`;
  const data = body.length > 0 ? ` -H 'Content-Type: application/json' \\\n  -d '${JSON.stringify(Object.fromEntries(body))}'` : '';
  const samples: CodeSample[] = [{ lang: 'Shell', label: 'curl', source: `curl${verb} "$UGS${url}"${auth}${data}` }];

  if (path.startsWith('/api/')) {
    const fields = [...query, ...body];
    const args = [
      ...('userGroupOrEmbedToken' in security ? ['process.env.GROUP_TOKEN!'] : []),
      ...pathValues.map(([, value]) => JSON.stringify(value)),
      ...(fields.length > 0 ? [`{ ${fields.map(([field, value]) => `${field}: ${JSON.stringify(value)}`).join(', ')} }`] : []),
    ];
    samples.push({
      lang: 'TypeScript',
      label: '@ugs/client',
      source: `${CLIENT}const answer = await ugs.${String(operation.operationId)}(${args.join(', ')});`,
    });
  }
  return samples;
}
