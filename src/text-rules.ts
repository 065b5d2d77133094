// The rules of contract section 1 for text that people read back (plant names and tags, garden
// names, token names) that a JSON-schema pattern cannot say with a clear message: valid Unicode
// only, and at least one visible character. Free of TypeBox, so the batch reader and the writer
// thread can load it.

// In a `u` expression a lone surrogate is a code point of its own (category Cs): a string holds
// one exactly when it is not well-formed UTF-16, and so cannot be stored as UTF-8 without being
// replaced by U+FFFD.
const LONE_SURROGATE = /\p{Cs}/u;

// What shows nothing on its own: whitespace (Z and U+0085), default-ignorable code points (zero-width
// characters, joiners, variation selectors, Hangul fillers, the soft hyphen…), format characters
// (bidi controls, U+FEFF…) and control characters. A name needs one character outside these.
const VISIBLE = /[^\p{White_Space}\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}]/u;
const INVISIBLE_NOT_SPACE = /[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}]/u;
/** The control characters section 1 refuses in any text field (U+0000–U+001F, U+007F). */
export const CONTROL = /[\u0000-\u001f\u007f]/u;

const hex = (unit: number) => `U+${unit.toString(16).toUpperCase().padStart(4, '0')}`;

/** Why `value` is not valid Unicode (a lone surrogate, named), or null when it is. */
export function unicodeProblem(value: string): string | null {
  const m = LONE_SURROGATE.exec(value);
  if (m === null) return null;
  const unit = m[0].charCodeAt(0).toString(16);
  return `must be valid Unicode (it holds \\u${unit}, half of a surrogate pair)`;
}

/**
 * Why text that must be "not blank" has nothing to see (null: it has a visible character). Only
 * whitespace is "blank", as before version 5; invisible characters are named by their code point.
 */
export function visibleProblem(value: string): string | null {
  if (VISIBLE.test(value)) return null;
  const m = INVISIBLE_NOT_SPACE.exec(value);
  if (m === null) return 'must not be blank';
  return `must have a visible character (it holds only spaces or invisible characters such as ${hex(m[0].codePointAt(0)!)})`;
}

/** Why a name, tag or label breaks section 1's rules, in the words the schema errors use; null: it does not. */
export function textProblem(value: string, max: number): string | null {
  const length = [...value].length;
  if (length === 0) return 'must not be empty';
  if (length > max) return `must be at most ${max} characters`;
  if (CONTROL.test(value)) return 'must not contain control characters';
  return unicodeProblem(value) ?? visibleProblem(value);
}

const pointerPart = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * The first string of a parsed JSON value (a key or a value) that is not valid Unicode, as a JSON
 * pointer (`/plants/3/name`) and why; null when every one is. Iterative, so that however deeply the
 * value nests the walk cannot overflow the stack; its time is bounded by the body it came from.
 */
export function illFormedAt(root: unknown): { field: string; message: string } | null {
  const stack: [unknown, string][] = [[root, '']];
  while (stack.length > 0) {
    const [value, at] = stack.pop()!;
    if (typeof value === 'string') {
      const problem = unicodeProblem(value);
      if (problem !== null) return { field: at, message: problem };
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push([value[i], `${at}/${i}`]);
    } else if (value !== null && typeof value === 'object') {
      const keys = Object.keys(value);
      const fields = keys.map((key) => `${at}/${pointerPart(key.replace(/\p{Cs}/gu, '\ufffd'))}`);
      for (let i = 0; i < keys.length; i++) {
        // A bad key is named with U+FFFD for its lone half: the answer itself stays valid Unicode.
        const problem = unicodeProblem(keys[i]!);
        if (problem !== null)
          return {
            field: fields[i]!,
            message: problem.replace('valid Unicode', 'a valid Unicode field name'),
          };
      }
      for (let i = keys.length - 1; i >= 0; i--)
        stack.push([(value as Record<string, unknown>)[keys[i]!], fields[i]!]);
    }
  }
  return null;
}
