// The methods of @ugs/client as docs/client.md shows them, read from packages/client/src/client.ts:
// each method's parameters (a plain value by its name, an object by its fields, `?` when
// optional: from the parameter types, packages/client/src/types.ts, and what those types are in
// the service's OpenAPI document), its retry class, the request it sends and its doc comment.
// Used by `npm run generate:docs` (generate-operation-docs.ts) and test/docs-client.test.ts.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLIENT_SOURCE = fs.readFileSync(path.join(ROOT, 'packages/client/src/client.ts'), 'utf8');
const CLASS_START = CLIENT_SOURCE.indexOf('export class UserGroupServiceClient {');
/** The class's body: the file holds other classes too. */
const CLIENT_CLASS = CLIENT_SOURCE.slice(CLASS_START, CLIENT_SOURCE.indexOf('\n}\n', CLASS_START));
const TYPES_SOURCE = fs.readFileSync(path.join(ROOT, 'packages/client/src/types.ts'), 'utf8');

/** A parameter as a reader sees it: a plain value by its name, or an object by its fields (`?` when optional). */
export type Parameter = { value: string } | { fields: string[] };

export interface OpenApi {
  tags: { name: string }[];
  components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
  paths: Record<
    string,
    Record<
      string,
      {
        operationId?: string;
        tags?: string[];
        parameters?: { name: string; in: string; required?: boolean }[];
        requestBody?: { content?: Record<string, { schema?: { $ref?: string } }> };
      }
    >
  >;
}

export interface ClientMethod {
  name: string;
  parameters: Parameter[];
  /** `overload` or `idempotent`; a method that calls another has that one's. */
  retry: string | undefined;
  /** The request it sends, `METHOD /path` with `{id}` for a value in the path; undefined for none. */
  request: string | undefined;
  /** The first sentence of its doc comment, without its full stop. */
  summary: string;
}

/** Splits `text` at `separator` outside of <>, (), {} and []. */
export function splitTopLevel(text: string, separator: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    if ('<({['.includes(text[i])) depth++;
    else if ('>)}]'.includes(text[i]) && text[i - 1] !== '=') depth--;
    else if (depth === 0 && text.startsWith(separator, i)) {
      parts.push(text.slice(start, i).trim());
      start = i + separator.length;
    }
  }
  parts.push(text.slice(start).trim());
  return parts.filter((part) => part !== '');
}

function operationNamed(api: OpenApi, operationId: string) {
  const operation = Object.values(api.paths)
    .flatMap((item) => Object.values(item))
    .find((op) => op.operationId === operationId);
  if (!operation) throw new Error(`the OpenAPI document has no operation ${operationId}`);
  return operation;
}

function schemaFields(api: OpenApi, name: string): Map<string, boolean> {
  const declared = api.components.schemas[name];
  if (!declared?.properties) throw new Error(`the OpenAPI document has no object schema ${name}`);
  return new Map(Object.keys(declared.properties).map((field) => [field, declared.required?.includes(field) ?? false]));
}

/** The fields of a parameter type of the client, each with whether it is required. */
export function fieldsOfType(type: string, api: OpenApi): Map<string, boolean> {
  type = type.trim();
  const generic = /^(\w+)<([\s\S]*)>$/.exec(type);
  const names = (list: string) => [...list.matchAll(/'([^']+)'/g)].map((m) => m[1]);
  if (splitTopLevel(type, '&').length > 1) return new Map(splitTopLevel(type, '&').flatMap((part) => [...fieldsOfType(part, api)]));
  if (generic?.[1] === 'QueryOf' || generic?.[1] === 'ParamsOf') {
    const operation = operationNamed(api, names(generic[2])[0]);
    const query = new Map((operation.parameters ?? []).filter((p) => p.in === 'query').map((p) => [p.name, p.required === true]));
    const body = operation.requestBody?.content?.['application/json']?.schema?.$ref?.split('/').pop();
    return generic[1] === 'ParamsOf' && body ? new Map([...query, ...schemaFields(api, body)]) : query;
  }
  if (generic) {
    const [inner, keys] = splitTopLevel(generic[2], ',');
    const fields = fieldsOfType(inner, api);
    switch (generic[1]) {
      case 'WithId':
        return new Map([...fields, ['user_group_id', true]]);
      case 'Required':
        return new Map([...fields].map(([field]) => [field, true]));
      case 'Omit':
        return new Map([...fields].filter(([field]) => !names(keys).includes(field)));
      case 'Pick':
        return new Map([...fields].filter(([field]) => names(keys).includes(field)));
    }
    throw new Error(`a parameter type docs/client.md cannot show: ${type}`);
  }
  const schema = /^Schemas\['(\w+)'\]$/.exec(type);
  if (schema) return schemaFields(api, schema[1]);
  const alias = new RegExp(`^export type ${type} = ([^;]+);`, 'm').exec(TYPES_SOURCE);
  if (!alias) throw new Error(`packages/client/src/types.ts declares no type ${type}`);
  return fieldsOfType(alias[1], api);
}

/** Each method of the client class, in the order the class declares them. */
export function clientMethods(api: OpenApi): Map<string, ClientMethod> {
  const methods = new Map<string, ClientMethod>();
  const declared = [...CLIENT_CLASS.matchAll(/^ {2}(?:async \*)?(\w+)\((.*)\): [^\n]*\{$/gm)];
  for (const [index, [, name, list]] of declared.entries()) {
    const body = CLIENT_CLASS.slice(declared[index].index, declared[index + 1]?.index);
    const parameters = splitTopLevel(list, ',')
      .filter((parameter) => !/^options\??:/.test(parameter))
      .map((parameter): Parameter => {
        const [, own, type] = /^(\w+)\??: ([^=]+?)(?: = .*)?$/.exec(parameter) ?? [];
        if (!own) throw new Error(`${name}: a parameter docs/client.md cannot show: ${parameter}`);
        if (/^(?:string|number|boolean)$/.test(type)) return { value: own };
        const optionalAll = / = \{\}$/.test(parameter);
        return { fields: [...fieldsOfType(type, api)].map(([field, required]) => (required && !optionalAll ? field : `${field}?`)).sort() };
      });
    const called = /this\.(\w+)\(/.exec(body)?.[1];
    const spec = /method: '([A-Z]+)', path: (['`])(\/[^'`]*)\2/.exec(body);
    const before = CLIENT_CLASS.slice(0, declared[index].index);
    const comment = /\/\*\*([\s\S]*?)\*\/\s*$/.exec(before.slice(before.lastIndexOf('/**')))?.[1] ?? '';
    const text = comment
      .replace(/^\s*\* ?/gm, ' ')
      .replace(/\s+/g, ' ')
      .trim();
    methods.set(name, {
      name,
      parameters,
      retry: /retry: '(\w+)'/.exec(body)?.[1] ?? (called ? `via ${called}` : undefined),
      request: spec ? `${spec[1]} ${spec[3].replace(/\$\{encodeURIComponent\(String\((\w+)\)\)\}/g, '{$1}')}` : undefined,
      summary: (/^(.*?)\.(?: |$)/.exec(text)?.[1] ?? text).trim(),
    });
  }
  for (const method of methods.values()) if (method.retry?.startsWith('via ')) method.retry = methods.get(method.retry.slice(4))?.retry;
  return methods;
}

/** How docs/client.md writes parameters: `a`, or `{ a, b? }`. */
export const writtenParameters = (parameters: Parameter[]) => parameters.map((p) => ('value' in p ? p.value : `{ ${p.fields.join(', ')} }`)).join(', ');
