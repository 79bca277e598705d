// A JSON object field: a text area that says, as you type, where the JSON breaks (line,
// column and the line itself with a caret), and shows the service's validation details for
// the field next to it.
import { useMemo } from 'preact/hooks';
import { parse, printParseErrorCode, type ParseError } from 'jsonc-parser';

export interface JsonProblem {
  message: string;
  line: number;
  column: number;
  excerpt: string;
}

const READABLE: Record<string, string> = {
  InvalidSymbol: 'not a JSON value (strings need double quotes)',
  InvalidNumberFormat: 'not a valid number',
  PropertyNameExpected: 'a property name in double quotes was expected',
  ValueExpected: 'a value was expected',
  ColonExpected: 'a colon (:) was expected',
  CommaExpected: 'a comma (,) was expected',
  CloseBraceExpected: 'a closing brace (}) was expected',
  CloseBracketExpected: 'a closing bracket (]) was expected',
  EndOfFileExpected: 'nothing may follow the object',
  InvalidCommentToken: 'JSON has no comments',
  UnexpectedEndOfComment: 'JSON has no comments',
  UnexpectedEndOfString: 'the string is not closed',
  UnexpectedEndOfNumber: 'the number is not complete',
  InvalidUnicode: 'an invalid \\u escape',
  InvalidEscapeCharacter: 'an invalid escape',
  InvalidCharacter: 'a control character inside a string',
};

/** Where `offset` is, as people count: line and column from 1, and that line. */
function locate(text: string, offset: number): Omit<JsonProblem, 'message'> {
  const before = text.slice(0, offset).split('\n');
  const line = before.length;
  return { line, column: before[line - 1].length + 1, excerpt: text.split('\n')[line - 1] ?? '' };
}

/** null when `text` is empty or a JSON object; otherwise where and why it is not (jsonc-parser finds the offset). */
export function jsonProblem(text: string): JsonProblem | null {
  if (text.trim() === '') return null;
  const errors: ParseError[] = [];
  const value = parse(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  if (errors.length > 0) {
    const code = printParseErrorCode(errors[0].error);
    return { message: READABLE[code] ?? code, ...locate(text, errors[0].offset) };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return { message: 'must be a JSON object ({…})', ...locate(text, text.length - text.trimStart().length) };
  return null;
}

export function JsonEditor(props: { id: string; label: string; hint: string; value: string; onInput: (value: string) => void; serverError?: string }) {
  const problem = useMemo(() => jsonProblem(props.value), [props.value]);
  const errorId = `${props.id}-error`;
  const invalid = problem !== null || props.serverError !== undefined;
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      <p class="hint" id={`${props.id}-hint`}>
        {props.hint}
      </p>
      <textarea
        id={props.id}
        rows={6}
        spellcheck={false}
        value={props.value}
        aria-invalid={invalid}
        aria-describedby={`${props.id}-hint${invalid ? ` ${errorId}` : ''}`}
        onInput={(event) => props.onInput(event.currentTarget.value)}
      />
      {problem && (
        <div class="field-error" id={errorId}>
          <p>
            Line {problem.line}, column {problem.column}: {problem.message}
          </p>
          <pre class="json-pointer" aria-hidden="true">
            {problem.excerpt}
            {'\n'}
            {' '.repeat(Math.max(0, problem.column - 1))}^
          </pre>
        </div>
      )}
      {!problem && props.serverError && (
        <p class="field-error" id={errorId}>
          {props.serverError}
        </p>
      )}
    </div>
  );
}
