// `npm run check:api` (docs/operations.md, "Releases"): a change that breaks a client written
// against a release's OpenAPI document fails the check, naming the break; additions pass; a
// deliberate break passes only with a version that may break and a CHANGELOG.md line.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { breakingChanges, verdict } from '../scripts/api-compatibility.ts';
import { openApiDocument } from '../scripts/openapi-document.ts';
import { runNode } from './helpers/processes.ts';

// biome-ignore lint/suspicious/noExplicitAny: the tests edit an OpenAPI document in place, at paths they know
type Json = Record<string, any>;

describe('check:api', () => {
  let today: Json;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-check-api-'));
  before(async () => {
    today = await openApiDocument();
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  /**
   * A document that today's code breaks: what a client generated from it relies on and today's
   * no longer gives (an operation, a response field), or accepts and today's refuses (an enum
   * value, a request without a field today requires, a longer name).
   */
  function widerThanToday(): Json {
    const doc = structuredClone(today);
    const schemas = doc.components.schemas;
    doc.paths['/api/user/archive'] = {
      post: {
        operationId: 'archiveUserGroup',
        responses: { 200: { description: 'archived', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    };
    schemas.UserGroup.properties.legacy_code = { type: 'string' };
    schemas.UserGroup.required.push('legacy_code');
    schemas.EnvironmentTag.enum.push('Staging');
    schemas.RenameGroupTagRequest.required = ['name'];
    schemas.CreateGroupTagRequest.properties.name.maxLength = 4096;
    return doc;
  }

  it('npm run check:api -- --against FILE fails on a document that today breaks, and names each break', async () => {
    const file = path.join(dir, 'wider.json');
    fs.writeFileSync(file, JSON.stringify(widerThanToday()));
    const run = await runNode(['--import', 'tsx', 'scripts/check-api.ts', '--against', file]);
    assert.equal(run.code, 1, run.stdout + run.stderr);
    for (const expected of [
      'POST /api/user/archive: operation removed',
      'GET /api/user: response 200: field user_group.legacy_code removed',
      'POST /api/user: request body: field api_environment_tag value "Staging" no longer accepted',
      'POST /api/group_tags/rename: request body: field new_name now required',
      'POST /api/group_tags: request body: field name maxLength 4096 became 64',
    ])
      assert.ok(run.stderr.includes(expected), `names "${expected}":\n${run.stderr}`);
  });

  it('additions break nothing: a new operation, an optional request field, a response field, an error code', () => {
    const before = structuredClone(today);
    const after = structuredClone(today);
    after.paths['/api/user/archive'] = { post: { operationId: 'archiveUserGroup', responses: { 200: { description: 'archived' } } } };
    after.components.schemas.UserGroup.properties.archived_at = { type: 'string' };
    after.components.schemas.UserGroup.required.push('archived_at');
    after.components.schemas.CreateGroupTagRequest.properties.color = { type: 'string' };
    after.components.schemas.Error.properties.error.properties.code.enum.push('archived');
    after.components.schemas.EventType.enum.push('user_group.archived');
    assert.deepEqual(breakingChanges(before, after), []);
    assert.deepEqual(breakingChanges(today, today), []);
  });

  it('a break passes only with a version that may break and a "- **Breaking**" line in CHANGELOG.md; against a given file, never', () => {
    const breaks = ['DELETE /api/user: operation removed'];
    const quiet = '# Changelog\n\n## [Unreleased]\n\n### Changed\n\n- Something.\n\n## [0.1.0] - 2026-11-28\n';
    const declared = quiet.replace('- Something.', '- **Breaking**: `DELETE /api/user` is gone; delete with `POST /api/user/delete`.');
    const sameVersion = verdict(breaks, { baseline: '0.1.0', version: '0.1.0', changelog: declared });
    assert.equal(sameVersion.ok, false);
    assert.match(
      sameVersion.lines.join('\n'),
      /A deliberate break needs a version that may break \(package\.json says 0\.1\.0; after 0\.1\.0 that is 0\.2\.0, or 0\.2\.0-dev until it is cut\)/,
    );
    assert.equal(verdict(breaks, { baseline: '0.1.0', version: '0.1.1', changelog: declared }).ok, false, 'a patch may not break');
    const undeclared = verdict(breaks, { baseline: '0.1.0', version: '0.2.0', changelog: quiet });
    assert.equal(undeclared.ok, false);
    assert.match(undeclared.lines.join('\n'), /CHANGELOG\.md declares none for 0\.2\.0/);
    assert.equal(verdict(breaks, { baseline: '0.1.0', version: '0.2.0', changelog: declared }).ok, true);
    assert.equal(verdict(breaks, { baseline: '1.4.2', version: '1.5.0', changelog: declared }).ok, false, 'after 1.0.0 only a major may break');
    assert.equal(verdict(breaks, { baseline: '1.4.2', version: '2.0.0', changelog: declared }).ok, true);
    assert.equal(verdict(breaks, { version: '0.2.0', changelog: declared }).ok, false, '--against a file has no version to break');
    assert.equal(verdict([], { baseline: '0.1.0', version: '0.1.0', changelog: quiet }).ok, true);
  });
});
