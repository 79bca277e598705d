// docs/client.md lists every method of @ugs/client with the parameters it takes, and says
// which methods are never retried once a request may have reached the service. Written by
// hand, the list fell behind the client (it missed parent, level and tags, and half the
// methods), so it is held here to the client itself: its methods at run time, the parameter
// types each signature names (packages/client/src/types.ts), and what those types are in the
// service's OpenAPI document, which the client's types are generated from.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/processes.ts';
import { openApiDocument } from '../scripts/openapi-document.ts';
import { UserGroupServiceClient } from '../packages/client/src/index.ts';
import { UserGroupFieldsBody } from '../src/user-groups/user-groups.schemas.ts';

const CLIENT_DOC = fs.readFileSync(path.join(ROOT, 'docs/client.md'), 'utf8');
const CLIENT_SOURCE = fs.readFileSync(path.join(ROOT, 'packages/client/src/client.ts'), 'utf8');
/** The class's body: the file holds other classes too. */
const CLIENT_CLASS = CLIENT_SOURCE.slice(
  CLIENT_SOURCE.indexOf('export class UserGroupServiceClient {'),
  CLIENT_SOURCE.indexOf('\n}\n', CLIENT_SOURCE.indexOf('export class UserGroupServiceClient {')),
);
const TYPES_SOURCE = fs.readFileSync(path.join(ROOT, 'packages/client/src/types.ts'), 'utf8');

/** A parameter as a reader sees it: a plain value by its name, or an object by its fields (`?` when optional). */
type Parameter = { value: string } | { fields: string[] };

interface OpenApi {
  components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
  paths: Record<string, Record<string, { operationId?: string; parameters?: { name: string; in: string; required?: boolean }[] }>>;
}

/** Splits `text` at `separator` outside of <>, (), {} and []. */
function splitTopLevel(text: string, separator: string): string[] {
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

/** The fields of a parameter type of the client, each with whether it is required. */
function fieldsOfType(type: string, api: OpenApi): Map<string, boolean> {
  type = type.trim();
  const generic = /^(\w+)<([\s\S]*)>$/.exec(type);
  const names = (list: string) => [...list.matchAll(/'([^']+)'/g)].map((m) => m[1]);
  if (splitTopLevel(type, '&').length > 1) return new Map(splitTopLevel(type, '&').flatMap((part) => [...fieldsOfType(part, api)]));
  if (generic?.[1] === 'QueryOf') {
    const operationId = names(generic[2])[0];
    const operation = Object.values(api.paths)
      .flatMap((item) => Object.values(item))
      .find((op) => op.operationId === operationId);
    assert.ok(operation, `the OpenAPI document has an operation ${operationId}`);
    return new Map((operation.parameters ?? []).filter((p) => p.in === 'query').map((p) => [p.name, p.required === true]));
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
    assert.fail(`a parameter type this test cannot read: ${type}`);
  }
  const schema = /^Schemas\['(\w+)'\]$/.exec(type);
  if (schema) {
    const declared = api.components.schemas[schema[1]];
    assert.ok(declared?.properties, `the OpenAPI document has an object schema ${schema[1]}`);
    return new Map(Object.keys(declared.properties).map((field) => [field, declared.required?.includes(field) ?? false]));
  }
  const alias = new RegExp(`^export type ${type} = ([^;]+);`, 'm').exec(TYPES_SOURCE);
  assert.ok(alias, `packages/client/src/types.ts declares ${type}`);
  return fieldsOfType(alias[1], api);
}

/** Each method of the client class: its signature's parameters (the call options left out) and its retry class. */
function clientMethods(api: OpenApi): Map<string, { parameters: Parameter[]; retry: string | undefined }> {
  const methods = new Map<string, { parameters: Parameter[]; retry: string | undefined }>();
  const declared = [...CLIENT_CLASS.matchAll(/^ {2}(?:async \*)?(\w+)\((.*)\): [^\n]*\{$/gm)];
  for (const [index, [, name, list]] of declared.entries()) {
    const body = CLIENT_CLASS.slice(declared[index].index, declared[index + 1]?.index);
    const parameters = splitTopLevel(list, ',')
      .filter((parameter) => !/^options\??:/.test(parameter))
      .map((parameter): Parameter => {
        const [, own, type] = /^(\w+)\??: ([^=]+?)(?: = .*)?$/.exec(parameter) ?? [];
        assert.ok(own, `${name}: a parameter this test cannot read: ${parameter}`);
        if (/^(?:string|number|boolean)$/.test(type)) return { value: own };
        const optionalAll = / = \{\}$/.test(parameter);
        return { fields: [...fieldsOfType(type, api)].map(([field, required]) => (required && !optionalAll ? field : `${field}?`)).sort() };
      });
    const called = /this\.(\w+)\(/.exec(body)?.[1];
    methods.set(name, { parameters, retry: /retry: '(\w+)'/.exec(body)?.[1] ?? (called ? `via ${called}` : undefined) });
  }
  for (const method of methods.values()) if (method.retry?.startsWith('via ')) method.retry = methods.get(method.retry.slice(4))?.retry;
  return methods;
}

/**
 * `…fields` in an object of docs/client.md stands for a group's fields, each optional (the
 * field table of docs/api.md, "The user group", which test/docs-fields.test.ts holds to the
 * declaration): a field added to a group needs no edit here.
 */
const GROUP_FIELDS = Object.keys(UserGroupFieldsBody.properties)
  .filter((field) => field !== 'user_group_id' && field !== 'api_environment_tag')
  .map((field) => `${field}?`);

/** The methods of the tables of docs/client.md: `name(arguments)` in a row's first cell. */
function documentedMethods(): Map<string, Parameter[]> {
  const methods = new Map<string, Parameter[]>();
  for (const [, name, list] of CLIENT_DOC.matchAll(/^\| `(\w+)\((.*?)\)` \|/gm)) {
    assert.ok(!methods.has(name), `docs/client.md lists ${name} twice`);
    methods.set(
      name,
      splitTopLevel(list, ',').map((argument): Parameter => {
        const object = /^\{(.*)\}$/.exec(argument);
        if (!object) return { value: argument };
        return {
          fields: splitTopLevel(object[1], ',')
            .flatMap((field) => (field === '…fields' ? GROUP_FIELDS : [field]))
            .sort(),
        };
      }),
    );
  }
  return methods;
}

const written = (parameters: Parameter[]) => parameters.map((p) => ('value' in p ? 'value' : `{ ${p.fields.join(', ')} }`)).join(', ');

describe('docs/client.md', () => {
  let api: OpenApi;
  before(async () => {
    api = (await openApiDocument()) as unknown as OpenApi;
  });

  it('docs: client.md lists every method of the client, and no other', () => {
    const methods = Object.getOwnPropertyNames(UserGroupServiceClient.prototype).filter((name) => name !== 'constructor');
    assert.deepEqual([...documentedMethods().keys()].sort(), methods.sort());
  });

  it('docs: each method in client.md takes the parameters its signature and the OpenAPI document give it, optional ones marked ?', () => {
    const documented = documentedMethods();
    const wrong: string[] = [];
    for (const [name, { parameters }] of clientMethods(api)) {
      const shown = documented.get(name);
      if (shown === undefined) continue; // the test above names it
      if (written(shown) !== written(parameters)) wrong.push(`${name}: docs/client.md says (${written(shown)}), the client takes (${written(parameters)})`);
    }
    assert.deepEqual(wrong, []);
  });

  it('docs: client.md names exactly the methods never retried once a request may have reached the service', () => {
    const bullet = /^- A call that got no response[\s\S]*?(?=\n- |\n\n)/m.exec(CLIENT_DOC);
    assert.ok(bullet, 'docs/client.md, "Retries", says which calls are retried when no response came');
    const never = /never retried then:?([^.]*)\./.exec(bullet[0].replace(/\s+/g, ' '));
    assert.ok(never, 'the bullet lists the methods never retried then');
    const listed = [...never[1].matchAll(/`(\w+)`/g)].map((m) => m[1]).sort();
    const overloadOnly = [...clientMethods(api)].filter(([, method]) => method.retry === 'overload').map(([name]) => name);
    assert.deepEqual(listed, overloadOnly.sort());
  });
});
