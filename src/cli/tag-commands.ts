// `ugs tags list|rename|delete` (docs/cli.md, "Tags"; docs/api.md, "Tags"): an environment's tag
// set from the command line, through the same service as the API, acting for the operator
// (the history records the command-line tool).
import type { Command } from 'commander';
import { loadConfig } from '../config.ts';
import type { Environment } from '../db/schema.ts';
import { AppError } from '../foundations/errors.ts';
import { COMMAND_LINE_ACTOR } from '../audit/actor.ts';
import type { Principal } from '../auth/principal.ts';
import type { GroupTagDeps } from '../group-tags/group-tags.service.ts';
import { accountOption, cliHeavyOperations, environmentOption, jsonOption, print, UsageError, withDatabase } from './cli-parts.ts';

interface TagOptions {
  account: string;
  env: Environment;
  json?: boolean;
}

export function registerTagCommands(program: Command): void {
  const tags = program
    .command('tags')
    .description('an environment\'s tags: list them with their counts, rename or delete one on every group (docs/api.md, "Tags")');
  const tagCommand = (name: string, description: string) =>
    tags
      .command(name)
      .description(description)
      .addOption(accountOption())
      .addOption(environmentOption('the environment', { default: 'Customer' }))
      .addOption(jsonOption());
  tagCommand('list', 'list the tags with how many groups carry each, in code-point order')
    .option('--prefix <text>', 'only the tags that start with this')
    .action(listTags);
  tagCommand('rename', 'rename a tag on every group that carries it; onto an existing tag, the two merge')
    .argument('<name>', 'the tag')
    .argument('<new-name>', 'its new name')
    .action(renameTag);
  tagCommand('delete', 'remove a tag from every group that carries it, and from the set').argument('<name>', 'the tag').action(deleteTag);
}

async function listTags(opts: TagOptions & { prefix?: string }): Promise<void> {
  const { listGroupTagsPage } = await import('../group-tags/group-tags.service.ts');
  const listed = await asOperator(opts, async (deps, principal) => {
    const all = [];
    for (let cursor: string | undefined; ; ) {
      const page = await listGroupTagsPage(deps, principal, { limit: 500, cursor, q: opts.prefix });
      all.push(...page.tags);
      if (page.nextCursor === null) return all;
      cursor = page.nextCursor;
    }
  });
  print(opts, listed, ['tag\tgroups', ...listed.map((tag) => `${tag.name}\t${tag.user_group_count}`)].join('\n'));
}

async function renameTag(name: string, newName: string, opts: TagOptions): Promise<void> {
  const { renameGroupTag } = await import('../group-tags/group-tags.service.ts');
  const { renameInput } = await tagNameChecks();
  const renamed = await asOperator(opts, (deps, principal) =>
    renameGroupTag(deps, principal, COMMAND_LINE_ACTOR, renameInput({ name, new_name: newName, api_environment_tag: opts.env })),
  );
  print(
    opts,
    { ...renamed.tag, merged: renamed.merged, user_groups_changed: renamed.userGroupsChanged },
    `renamed tag "${name}" to "${newName}" on ${renamed.userGroupsChanged} groups${renamed.merged ? ` (merged into the existing tag; ${renamed.tag.user_group_count} groups carry it now)` : ''}`,
  );
}

async function deleteTag(name: string, opts: TagOptions): Promise<void> {
  const { deleteGroupTagEverywhere } = await import('../group-tags/group-tags.service.ts');
  const { tagKey } = await tagNameChecks();
  const deleted = await asOperator(opts, (deps, principal) => {
    const key = tagKey({ name, api_environment_tag: opts.env });
    return deleteGroupTagEverywhere(deps, principal, COMMAND_LINE_ACTOR, { ...key, name });
  });
  print(opts, { name, user_groups_changed: deleted.userGroupsChanged }, `deleted tag "${name}" from ${deleted.userGroupsChanged} groups`);
}

/** Runs `work` as the operator of the account's environment; a refusal of the service (an unknown tag, a bad name) is a usage error. */
async function asOperator<T>(opts: TagOptions, work: (deps: GroupTagDeps, principal: Principal) => Promise<T>): Promise<T> {
  const { findTenant, operatorPrincipal } = await import('../user-groups/transfer/transfer.service.ts');
  return withDatabase(async (handle) => {
    const tenant = await findTenant(handle, opts.account, opts.env);
    if (!tenant) throw new UsageError(`no account "${opts.account}"`);
    try {
      const { tagBatchSize, maxTagsPerEnvironment } = loadConfig();
      const deps = {
        database: handle,
        now: () => new Date(),
        batchSize: tagBatchSize,
        maxTagsPerEnvironment,
        heavyOperations: await cliHeavyOperations(handle),
      };
      return await work(deps, operatorPrincipal(tenant));
    } catch (err) {
      throw err instanceof AppError && err.status < 500 ? new UsageError(err.message) : err;
    }
  });
}

/** The names checked as the API checks them (1-64 characters, no control characters). */
async function tagNameChecks() {
  const { getBodyOf } = await import('../http/validation.ts');
  const { GroupTagKey, RenameGroupTagBody } = await import('../group-tags/group-tags.schemas.ts');
  return { renameInput: getBodyOf(RenameGroupTagBody), tagKey: getBodyOf(GroupTagKey) };
}
