// The tags in use, offered under a group's comma-separated tags as they are typed: those of the
// environment that start with the tag being typed (GET /api/group_tags?q=), each with its
// count; one click puts it in the field. The tags the field holds already are left out.
import type { EnvironmentTag } from '../../../packages/client/src/index.ts';
import type { Session } from '../session.ts';
import { useLoad } from './common.tsx';

const OFFERED = 8;

/** The tags before the last comma, and the one being typed. */
function splitTags(value: string): { chosen: string[]; typing: string } {
  const parts = value.split(',').map((part) => part.trim());
  return { chosen: parts.slice(0, -1).filter(Boolean), typing: parts[parts.length - 1] };
}

export function TagSuggestions(props: { session: Session; environment: EnvironmentTag; value: string; onPick: (value: string) => void; fieldId: string }) {
  const { chosen, typing } = splitTags(props.value);
  const found = useLoad(
    () => props.session.client.listGroupTags({ api_environment_tag: props.environment, q: typing || undefined, limit: OFFERED + chosen.length }),
    [props.environment, typing],
  );
  const offered = (found.data?.group_tags ?? []).filter((tag) => !chosen.includes(tag.name)).slice(0, OFFERED);
  if (offered.length === 0) return null;
  const pick = (name: string) => {
    props.onPick(`${[...chosen, name].join(', ')}, `);
    document.getElementById(props.fieldId)?.focus();
  };
  return (
    <div class="tag-suggestions" role="group" aria-labelledby={`${props.fieldId}-suggested`}>
      <span class="hint" id={`${props.fieldId}-suggested`}>
        In use in {props.environment}:
      </span>
      {offered.map((tag) => (
        <button type="button" class="secondary small" onClick={() => pick(tag.name)}>
          {tag.name} <span class="count">{tag.user_group_count}</span>
        </button>
      ))}
    </div>
  );
}
