// @ugs/client as another project gets it: packed with npm pack, installed from the tarball
// into a fresh project outside this repository (strict, NodeNext), compiled there, and run
// against a live server, every operation. The package ships JavaScript and .d.ts and imports
// nothing outside itself; its types are the ones generated from the current OpenAPI document.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT, runNode, useServerProcesses } from './helpers/processes.ts';
import { CLIENT_TYPES_FILE, clientTypesSource } from '../scripts/generate-client-types.ts';

const exec = promisify(execFile);

const PROGRAM = `import { UserGroupServiceClient, UserGroupServiceError, type UserGroup } from '@ugs/client';

declare const process: { env: Record<string, string | undefined> };

const ugs = new UserGroupServiceClient({ baseUrl: process.env.UGS ?? '', apiToken: process.env.TOKEN });
const seen: Record<string, unknown> = {};

const created: UserGroup = (await ugs.createUserGroup({ user_group_id: 'packed-1', name: 'Packed', properties: { region: 'emea' } })).user_group;
seen.created = created.provided_id;
const again = await ugs.getOrCreateUserGroup({ user_group_id: 'packed-1' });
seen.again = again.new_user_group;
const withBody = await ugs.getOrCreateUserGroup({ user_group_id: 'packed-2', properties: { plan: 'pro' } });
seen.withBody = withBody.new_user_group;
seen.updated = (await ugs.updateUserGroup({ user_group_id: 'packed-1', name: 'Packed again' })).user_group.name;
const rotated = await ugs.rotateToken({ current_token: created.token, grace_period_seconds: 0 });
seen.rotated = rotated.user_group.token !== created.token;
const page = await ugs.listUserGroups({ q: 'packed' });
seen.listed = page.user_groups.map((g) => g.provided_id);
let iterated = 0;
for await (const _group of ugs.iterateUserGroups({ q: 'packed' })) iterated++;
seen.iterated = iterated;
seen.history = (await ugs.userGroupHistory({ user_group_id: 'packed-1' })).entries.map((e) => e.action);
const embed = await ugs.createEmbedToken({ user_group_id: 'packed-1' });
seen.embed = (await ugs.getEmbedContext(embed.embed_token)).variables.user_group_name;
seen.deleted = (await ugs.deleteUserGroup({ user_group_id: 'packed-2' })).user_group.provided_id;
await ugs.createGroupTag({ name: 'packed-tag' });
await ugs.updateUserGroup({ user_group_id: 'packed-1', group_tags: ['packed-tag'] });
seen.tags = (await ugs.listGroupTags({ q: 'packed' })).group_tags.map((tag) => [tag.name, tag.user_group_count]);
seen.tagRenamed = (await ugs.renameGroupTag({ name: 'packed-tag', new_name: 'packed-tag-2' })).user_groups_changed;
seen.tagDeleted = (await ugs.deleteGroupTag({ name: 'packed-tag-2' })).name;
try {
  await ugs.createUserGroup({ user_group_id: 'packed-1' });
} catch (err) {
  if (err instanceof UserGroupServiceError) seen.error = [err.status, err.code];
}
console.log(JSON.stringify(seen));
`;

describe('@ugs/client, packed and installed outside this repository', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-client-consumer-'));
  const served = useServerProcesses('sqlite', { count: 1 });

  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('client package: its types are the ones generated from the current OpenAPI document (npm run generate:client)', async () => {
    assert.equal(
      fs.readFileSync(CLIENT_TYPES_FILE, 'utf8'),
      await clientTypesSource(),
      'packages/client/src/openapi.ts is out of date: run npm run generate:client',
    );
  });

  it('client package: npm pack, install in a strict NodeNext project, compile and run every operation', async () => {
    await exec('npm', ['run', 'build', '-w', '@ugs/client'], { cwd: ROOT });
    const { stdout: packed } = await exec('npm', ['pack', '-w', '@ugs/client', '--json', '--pack-destination', dir], { cwd: ROOT });
    const [{ filename, files }] = JSON.parse(packed) as [{ filename: string; files: { path: string }[] }];
    const shipped = files.map((f) => f.path);
    assert.ok(shipped.includes('dist/index.js') && shipped.includes('dist/index.d.ts'), shipped.join(', '));
    assert.ok(
      shipped.every((file) => ['package.json', 'README.md', 'LICENSE'].includes(file) || file.startsWith('dist/')),
      `only dist, package.json, the README and the license ship: ${shipped.join(', ')}`,
    );
    assert.equal(
      fs.readFileSync(path.join(ROOT, 'packages/client/LICENSE'), 'utf8'),
      fs.readFileSync(path.join(ROOT, 'LICENSE'), 'utf8'),
      'the client ships the project license',
    );
    assert.ok(shipped.includes('LICENSE'), 'the license is in the tarball');
    // Source maps would point at src/, which does not ship: there are none.
    assert.deepEqual(
      shipped.filter((file) => file.endsWith('.map')),
      [],
    );
    for (const file of shipped.filter((f) => /\.(js|d\.ts)$/.test(f))) {
      const text = fs.readFileSync(path.join(ROOT, 'packages/client', file), 'utf8');
      assert.doesNotMatch(text, /from '\.\.\/\.\.|from "\.\.\/\.\.|typebox|\.ts'/, `${file} imports nothing outside the package`);
      assert.doesNotMatch(text, /sourceMappingURL/, `${file} names no source map`);
    }

    const project = path.join(dir, 'consumer');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    await exec('npm', ['install', '--no-audit', '--no-fund', '--offline', path.join(dir, filename)], { cwd: project });
    fs.writeFileSync(path.join(project, 'main.ts'), PROGRAM);
    fs.writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { strict: true, module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', outDir: 'dist', types: [] } }),
    );
    const compiled = await runNode([path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', project]);
    assert.equal(compiled.code, 0, `tsc in the consumer:\n${compiled.stdout}${compiled.stderr}`);

    const ran = await runNode([path.join(project, 'dist/main.js')], { UGS: served.on(0), TOKEN: served.token });
    assert.equal(ran.code, 0, ran.stderr);
    assert.deepEqual(JSON.parse(ran.stdout), {
      created: 'packed-1',
      again: false,
      withBody: true,
      updated: 'Packed again',
      rotated: true,
      listed: ['packed-1', 'packed-2'],
      iterated: 2,
      history: ['user_group.rotate', 'user_group.update', 'user_group.create'],
      embed: 'Packed again',
      deleted: 'packed-2',
      tags: [['packed-tag', 1]],
      tagRenamed: 1,
      tagDeleted: 'packed-tag-2',
      error: [409, 'user_group_exists'],
    });
  });
});
