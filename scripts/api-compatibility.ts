// What `npm run check:api` decides (scripts/check-api.ts runs it): which changes between two
// OpenAPI documents break a client written against the first, and whether this version may
// make them. The comparison is api-smart-diff's (its OpenAPI rules know a request from a
// response: a field removed from an answer breaks, one removed from a request does not); this
// module names each break where a reader finds it, and holds the rule of docs/operations.md,
// "Releases": a break needs a version that semver lets break (the major, or the minor before
// 1.0.0) and a CHANGELOG.md line that says so.
import { apiCompare, type Diff } from 'api-smart-diff';

type Json = Record<string, unknown>;

/** The breaking changes from `before` to `after`, one sentence each, in the documents' order. */
export function breakingChanges(before: Json, after: Json): string[] {
  const { diffs } = apiCompare(before, after);
  // Only what the operations see: the same change in components/ shows again under every path that uses it.
  const breaks = diffs.filter((diff) => diff.type === 'breaking' && diff.path[0] === 'paths' && !openEnumGrew(diff, after));
  return [...new Set(breaks.map((diff) => describe(diff, before, after)))];
}

/**
 * A value added to an enum that the service declares open (`x-ugs-open-enum`: the error codes,
 * the event types), which docs/api.md tells clients to expect more of: not a break.
 */
function openEnumGrew(diff: Diff, after: Json): boolean {
  const path = diff.path.map(String);
  if (diff.action !== 'add' || path.at(-2) !== 'enum') return false;
  const owner = resolvedAt(after, path.slice(0, -2)) as Json | undefined;
  return owner?.['x-ugs-open-enum'] === true;
}

/** The node at `path` in `document`, following each $ref (local ones: #/components/…) on the way. */
function resolvedAt(document: Json, path: string[]): unknown {
  const follow = (node: unknown): unknown => {
    let seen = 0;
    while (node && typeof node === 'object' && typeof (node as Json).$ref === 'string' && seen++ < 32)
      node = at(document, ((node as Json).$ref as string).replace(/^#\//, '').split('/'));
    return node;
  };
  let node: unknown = document;
  for (const step of path) node = follow(node && typeof node === 'object' ? (node as Json)[step] : undefined);
  return node;
}

function describe(diff: Diff, before: Json, after: Json): string {
  const [, route, method, ...rest] = diff.path.map(String);
  if (method === undefined) return `${route}: path removed`;
  const operation = `${method.toUpperCase()} ${route}`;
  if (rest.length === 0) return diff.action === 'remove' ? `${operation}: operation removed` : `${operation}: operation changed`;
  const [part, key, ...schemaPath] = rest;
  let where: string;
  let inner: string[];
  if (part === 'parameters') {
    const parameter = (at(before, ['paths', route, method, 'parameters', key]) ?? at(after, ['paths', route, method, 'parameters', key])) as
      | { name?: string; in?: string }
      | undefined;
    where = `${parameter?.in ?? 'parameter'} parameter ${parameter?.name ?? key}`;
    inner = schemaPath[0] === 'schema' ? schemaPath.slice(1) : schemaPath;
  } else if (part === 'requestBody') {
    where = 'request body';
    inner = withoutMedia([key, ...schemaPath]);
  } else if (part === 'responses') {
    where = `response ${key}`;
    inner = withoutMedia(schemaPath);
  } else {
    return `${operation}: ${diff.description ?? rest.join('.')}`;
  }
  return `${operation}: ${where}${whatChanged(diff, inner)}`;
}

/** The schema path after `content.<media type>.schema`, or what is there when it is not a schema's. */
function withoutMedia(path: string[]): string[] {
  return path[0] === 'content' && path[2] === 'schema' ? path.slice(3) : path;
}

function whatChanged(diff: Diff, path: string[]): string {
  const fields: string[] = [];
  let i = 0;
  while (i < path.length) {
    const step = path[i];
    if (step === 'properties' && i + 2 < path.length) {
      fields.push(path[i + 1]);
      i += 2;
    } else if (step === 'items') {
      fields.push('[]');
      i++;
    } else if ((step === 'anyOf' || step === 'oneOf' || step === 'allOf') && i + 1 < path.length) i += 2;
    else break;
  }
  const tail = path.slice(i);
  const field = fields.join('.').replaceAll('.[]', '[]');
  const of = field ? ` field ${field}` : '';
  const json = (value: unknown) => JSON.stringify(value);
  const done = { add: 'added', remove: 'removed', replace: 'changed', rename: 'renamed' }[diff.action];
  if (tail[0] === 'properties' && tail.length === 2) return `: field ${field ? `${field}.` : ''}${tail[1]} ${done}`;
  if (tail[0] === 'enum') return `:${of} value ${json(diff.before ?? diff.after)} ${diff.action === 'remove' ? 'no longer accepted' : done}`;
  if (tail[0] === 'required')
    return `: field ${field ? `${field}.` : ''}${String(diff.after ?? diff.before)} ${diff.action === 'remove' ? 'no longer always present' : 'now required'}`;
  if (tail.length === 1 && diff.action === 'replace') return `:${of} ${tail[0]} ${json(diff.before)} became ${json(diff.after)}`;
  if (tail.length === 1 && diff.action === 'add') return `:${of} ${tail[0]} ${json(diff.after)} added`;
  if (tail.length === 0) return `:${of || ' it was'} ${done}`;
  return `:${of} ${tail.join('.')} ${done}`;
}

function at(document: unknown, path: string[]): unknown {
  let node = document;
  for (const step of path) node = node && typeof node === 'object' ? (node as Json)[step] : undefined;
  return node;
}

/** Whether a release `to` may break what release `from` promised: a new major, or a new minor before 1.0.0. */
export function mayBreak(from: string, to: string): boolean {
  const [a, b] = [parseVersion(from), parseVersion(to)];
  if (b.major !== a.major) return b.major > a.major;
  return a.major === 0 && b.minor > a.minor;
}

export function parseVersion(version: string): { major: number; minor: number; patch: number } {
  const match = /^(\d+)\.(\d+)\.(\d+)(?:-[\w.]+)?$/.exec(version);
  if (!match) throw new Error(`not a version: ${version}`);
  return { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]) };
}

/** Semver's order, pre-releases included: 0.2.0-dev comes before 0.2.0. */
export function compareVersions(a: string, b: string): number {
  const [x, y] = [parseVersion(a), parseVersion(b)];
  const preRelease = (v: string) => (v.includes('-') ? 0 : 1);
  return x.major - y.major || x.minor - y.minor || x.patch - y.patch || preRelease(a) - preRelease(b);
}

/**
 * The lines of CHANGELOG.md's section for `version` (or of "Unreleased" while that version is
 * being made) that declare a break: they start with "- **Breaking".
 */
export function declaredBreaks(changelog: string, version: string): string[] {
  const sections = changelog.split(/^## /m).slice(1);
  const section = sections.filter((s) => s.startsWith('[Unreleased]') || s.startsWith(`[${version}]`)).join('\n');
  return section.split('\n').filter((line) => line.startsWith('- **Breaking'));
}

export interface Verdict {
  ok: boolean;
  lines: string[];
}

/**
 * The check's answer. Against the kept document of release `baseline` (undefined: a document
 * given with --against, which no version lets break), this code of `version` may break only with
 * a version that semver lets break and a CHANGELOG.md line that declares it.
 */
export function verdict(breaks: string[], { baseline, version, changelog }: { baseline?: string; version: string; changelog: string }): Verdict {
  const against = baseline === undefined ? 'the given document' : `release ${baseline}'s OpenAPI document`;
  if (breaks.length === 0) return { ok: true, lines: [`check:api: no breaking change against ${against}`] };
  const listed = breaks.map((line) => `  - ${line}`);
  if (baseline !== undefined && mayBreak(baseline, version)) {
    const declared = declaredBreaks(changelog, version);
    if (declared.length > 0)
      return { ok: true, lines: [`check:api: ${breaks.length} breaking changes against ${against}, declared for ${version} in CHANGELOG.md:`, ...listed] };
    return {
      ok: false,
      lines: [
        `check:api: ${breaks.length} breaking changes against ${against}, and CHANGELOG.md declares none for ${version}:`,
        ...listed,
        'A deliberate break needs a line under "Unreleased" that starts with "- **Breaking**" and says what clients must change.',
      ],
    };
  }
  const bump =
    baseline === undefined
      ? ''
      : ` A deliberate break needs a version that may break (package.json says ${version}; after ${baseline} that is ${nextBreaking(baseline)}, or ${nextBreaking(baseline)}-dev until it is cut) and a "- **Breaking**" line in CHANGELOG.md.`;
  return { ok: false, lines: [`check:api: ${breaks.length} breaking changes against ${against}:`, ...listed, ...(bump ? [bump.trim()] : [])] };
}

function nextBreaking(version: string): string {
  const { major, minor } = parseVersion(version);
  return major === 0 ? `0.${minor + 1}.0` : `${major + 1}.0.0`;
}
