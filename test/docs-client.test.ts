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
import { clientMethods, splitTopLevel, type OpenApi, type Parameter } from '../scripts/client-methods.ts';
import { operationDocs } from '../scripts/generate-operation-docs.ts';

const CLIENT_DOC = fs.readFileSync(path.join(ROOT, 'docs/client.md'), 'utf8');
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
    assert.deepEqual([...documentedMethods().keys()].sort(), methods.sort(), 'docs/client.md is out of date: run npm run generate:docs');
  });

  it("docs: client.md's rows of the client's methods and api.md's table of scopes are what npm run generate:docs writes", async () => {
    for (const [file, text] of Object.entries(await operationDocs())) {
      assert.equal(fs.readFileSync(path.join(ROOT, file), 'utf8'), text, `${file} is out of date: run npm run generate:docs`);
    }
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
