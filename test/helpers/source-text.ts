// What the docs tests read of the repository's own text: the comments of its source files,
// its user docs, and the headings of its Markdown documents.
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from './processes.ts';

const SOURCE = /\.(?:ts|tsx|mts|js|mjs|cjs)$/;

/** Every source file under `dirs` (relative to the repository), as repository-relative paths. */
export function sourceFiles(...dirs: string[]): string[] {
  const walk = (dir: string): string[] =>
    fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
      const relative = `${dir}/${entry.name}`;
      if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'dist' ? [] : walk(relative);
      return SOURCE.test(entry.name) ? [relative] : [];
    });
  return dirs.flatMap(walk);
}

/** What users and contributors read: README.md, CONTRIBUTING.md and docs/*.md, as repository-relative paths. */
export function userDocFiles(): string[] {
  return [
    'README.md',
    'CONTRIBUTING.md',
    ...fs
      .readdirSync(path.join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
}

/** A comment, or a run of comments on consecutive lines, as one line of prose. */
export interface Comment {
  /** The line where it starts (1-based). */
  line: number;
  text: string;
}

const REGEX_FOLLOWS_WORD = new Set(['return', 'typeof', 'case', 'in', 'of', 'delete', 'void', 'throw', 'new', 'else', 'do', 'yield', 'await']);

/**
 * The comments of a TypeScript or JavaScript file, found by a small lexer that skips strings,
 * template literals and regular expressions (so `'http://…'` is not a comment). Comments on
 * consecutive lines are joined, their markers (`//`, `/*`, a JSDoc `*`) dropped, so that a
 * phrase broken over two lines reads as one.
 */
export function commentsOf(source: string): Comment[] {
  const raw: { line: number; endLine: number; ownLine: boolean; text: string }[] = [];
  let i = 0;
  let line = 1;
  let braces = 0;
  const templates: number[] = []; // brace depth at each open `${`
  let regexAllowed = true;
  const ownLine = () => /^[ \t]*$/.test(source.slice(source.lastIndexOf('\n', i - 1) + 1, i));
  const advanceTo = (end: number) => {
    for (let j = i; j < end; j++) if (source[j] === '\n') line++;
    i = end;
  };
  const scanTemplate = () => {
    while (i < source.length) {
      const c = source[i];
      if (c === '\\') advanceTo(i + 2);
      else if (c === '`') return advanceTo(i + 1);
      else if (c === '$' && source[i + 1] === '{') {
        templates.push(braces++);
        return advanceTo(i + 2);
      } else advanceTo(i + 1);
    }
  };
  while (i < source.length) {
    const c = source[i];
    const next = source[i + 1];
    if (c === '/' && next === '/') {
      const end = source.indexOf('\n', i);
      const stop = end === -1 ? source.length : end;
      raw.push({ line, endLine: line, ownLine: ownLine(), text: source.slice(i + 2, stop) });
      i = stop;
    } else if (c === '/' && next === '*') {
      const end = source.indexOf('*/', i + 2);
      const stop = end === -1 ? source.length : end;
      const start = line;
      const alone = ownLine();
      const text = source.slice(i + 2, stop);
      advanceTo(Math.min(source.length, stop + 2));
      raw.push({ line: start, endLine: line, ownLine: alone, text: text.replace(/^\s*\*(?!\/)/gm, ' ') });
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < source.length && source[j] !== c && source[j] !== '\n') j += source[j] === '\\' ? 2 : 1;
      advanceTo(Math.min(source.length, j + 1));
      regexAllowed = false;
    } else if (c === '`') {
      advanceTo(i + 1);
      scanTemplate();
      regexAllowed = false;
    } else if (c === '/' && regexAllowed) {
      let j = i + 1;
      let inClass = false;
      while (j < source.length && source[j] !== '\n' && (inClass || source[j] !== '/')) {
        if (source[j] === '\\') j++;
        else if (source[j] === '[') inClass = true;
        else if (source[j] === ']') inClass = false;
        j++;
      }
      advanceTo(Math.min(source.length, j + 1));
      regexAllowed = false;
    } else if (c === '{') {
      braces++;
      advanceTo(i + 1);
      regexAllowed = true;
    } else if (c === '}') {
      braces--;
      advanceTo(i + 1);
      if (templates.length > 0 && templates[templates.length - 1] === braces) {
        templates.pop();
        scanTemplate();
        regexAllowed = false;
      } else regexAllowed = true;
    } else if (/[\w$]/.test(c)) {
      let j = i;
      while (j < source.length && /[\w$]/.test(source[j])) j++;
      regexAllowed = REGEX_FOLLOWS_WORD.has(source.slice(i, j));
      advanceTo(j);
    } else {
      if (!/\s/.test(c)) regexAllowed = c !== ')' && c !== ']';
      advanceTo(i + 1);
    }
  }
  const joined: Comment[] = [];
  let lastEnd = -1;
  for (const { line: start, endLine, ownLine: alone, text } of raw) {
    const prose = text.replace(/\s+/g, ' ').trim();
    if (joined.length > 0 && alone && start === lastEnd + 1) joined[joined.length - 1].text += ` ${prose}`;
    else joined.push({ line: start, text: prose });
    lastEnd = endLine;
  }
  return joined;
}

/**
 * What a reader can find in a Markdown file by its title (outside fenced code): its headings,
 * and the bold words that open a paragraph or a list item (`**Timeouts.**`), without their
 * final stop.
 */
export function markdownTitles(file: string): Set<string> {
  const titles = new Set<string>();
  let fenced = false;
  for (const line of fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const title = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line) ?? /^(?:\s*[-*]\s+)?\*\*([^*]+?)[.:]?\*\*/.exec(line);
    if (title) titles.add(plainHeading(title[1]));
  }
  return titles;
}

/** A heading or a cited section title as plain text: no backticks, no link targets, single spaces. */
export function plainHeading(text: string): string {
  return text
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}
