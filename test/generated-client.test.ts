// A client generated from the live GET /openapi.json by tools nobody on this project wrote
// (openapi-typescript for the types, openapi-fetch for the calls) compiles under --strict
// with no cast, and performs every operation against a live server, on each backend: GET
// and DELETE with a query string only, as the README and docs/api.md call them.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { astToString, openapiTS } from '@ugs/openapi-codegen';
import { BACKENDS } from './helpers/backends.ts';
import { ROOT, runNode, useServerProcesses } from './helpers/processes.ts';

const PROGRAM = `import createClient from 'openapi-fetch';
import type { paths } from './schema.js';

declare const process: { env: Record<string, string | undefined>; exitCode?: number };

const api = createClient<paths>({ baseUrl: process.env.UGS, headers: { Authorization: \`Bearer \${process.env.TOKEN}\` } });
const statuses: Record<string, number> = {};

const created = await api.POST('/api/user', { body: { user_group_id: 'generated-1', name: 'Generated', properties: { region: 'emea' } } });
statuses.create = created.response.status;
const token: string = created.data?.user_group.token ?? '';

const got = await api.GET('/api/user', { params: { query: { user_group_id: 'generated-1' } } });
statuses.getOrCreate = got.response.status;
const isNew: boolean | undefined = got.data?.new_user_group;
statuses.getOrCreateNew = isNew === false ? 0 : 1;

const fresh = await api.GET('/api/user', { params: { query: { user_group_id: 'generated-2', name: 'Second' } } });
statuses.getOrCreateFresh = fresh.response.status;

const updated = await api.PUT('/api/user', { body: { user_group_id: 'generated-1', properties: { region: 'apac' } } });
statuses.update = updated.response.status;

const listed = await api.GET('/api/users', { params: { query: { q: 'generated', limit: 10 } } });
statuses.list = listed.response.status;
statuses.listed = listed.data?.user_groups.length ?? -1;

const history = await api.GET('/api/user/history', { params: { query: { user_group_id: 'generated-1' } } });
statuses.history = history.response.status;

const embed = await api.POST('/api/embed_token', { body: { user_group_id: 'generated-1', expires_in_seconds: 600 } });
statuses.embedToken = embed.response.status;

const context = await api.GET('/api/embed/context', { headers: { Authorization: \`Bearer \${embed.data?.embed_token ?? ''}\` } });
statuses.embedContext = context.response.status;
const region: unknown = context.data?.variables.region;
statuses.embedRegion = region === 'apac' ? 1 : 0;

const rotated = await api.POST('/api/user', { body: { current_token: token } });
statuses.rotate = rotated.response.status;

const refused = await api.POST('/api/user', { body: { user_group_id: 'generated-1' } });
statuses.conflict = refused.response.status;
const code: string | undefined = refused.error?.error.code;
statuses.conflictCode = code === 'user_group_exists' ? 1 : 0;

const deleted = await api.DELETE('/api/user', { params: { query: { user_group_id: 'generated-2' } } });
statuses.delete = deleted.response.status;

const tagCreated = await api.POST('/api/group_tags', { body: { name: 'generated-tag' } });
statuses.tagCreate = tagCreated.response.status;
const tags = await api.GET('/api/group_tags', { params: { query: { q: 'generated' } } });
const tagCount: number | undefined = tags.data?.group_tags[0]?.user_group_count;
statuses.tagCount = tagCount ?? -1;
const tagRenamed = await api.POST('/api/group_tags/rename', { body: { name: 'generated-tag', new_name: 'generated-tag-2' } });
statuses.tagRename = tagRenamed.response.status;
const tagDeleted = await api.DELETE('/api/group_tags', { params: { query: { name: 'generated-tag-2' } } });
statuses.tagDelete = tagDeleted.response.status;

const health = await api.GET('/healthz');
statuses.health = health.response.status;

console.log(JSON.stringify(statuses));
`;

for (const backend of BACKENDS) {
  describe(`[${backend}] a client generated from the OpenAPI document`, () => {
    const served = useServerProcesses(backend, { count: 1 });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-generated-client-'));

    after(() => fs.rmSync(dir, { recursive: true, force: true }));

    it('generated client: openapi-typescript + openapi-fetch compile under --strict and perform every operation', async () => {
      const spec = await (await fetch(`${served.on(0)}/openapi.json`)).json();
      fs.writeFileSync(path.join(dir, 'schema.ts'), astToString(await openapiTS(JSON.stringify(spec))));
      fs.writeFileSync(path.join(dir, 'main.ts'), PROGRAM);
      fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
      fs.writeFileSync(
        path.join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            target: 'ES2022',
            lib: ['ES2022', 'DOM'],
            types: [],
            outDir: 'dist',
            skipLibCheck: false,
          },
        }),
      );
      fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
      assert.doesNotMatch(PROGRAM, /\bas (any|never|unknown)\b/, 'no casts');

      const compiled = await runNode([path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', dir]);
      assert.equal(compiled.code, 0, `tsc --strict:\n${compiled.stdout}${compiled.stderr}`);

      const ran = await runNode([path.join(dir, 'dist/main.js')], { UGS: served.on(0), TOKEN: served.token });
      assert.equal(ran.code, 0, ran.stderr);
      assert.deepEqual(JSON.parse(ran.stdout), {
        create: 201,
        getOrCreate: 200,
        getOrCreateNew: 0,
        getOrCreateFresh: 201,
        update: 200,
        list: 200,
        listed: 2,
        history: 200,
        embedToken: 200,
        embedContext: 200,
        embedRegion: 1,
        rotate: 200,
        conflict: 409,
        conflictCode: 1,
        delete: 200,
        tagCreate: 201,
        tagCount: 0,
        tagRename: 200,
        tagDelete: 200,
        health: 200,
      });
    });
  });
}
