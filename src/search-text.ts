// What search (`GET /plants?q=`, contract section 2) compares: a plant's name and the query, both
// folded the same way, so that every engine indexes and matches exactly the same words.

/**
 * Longest word kept of a name, and of a query's term: a term is at most 100 characters as typed, but
 * folding may lengthen both ("ﬃ" is "ffi"), so both are cut the same way and a term still begins
 * the word it was typed from.
 */
const MAX_WORD = 100;
/** Most terms a query may have. */
export const MAX_TERMS = 8;
/** Most characters of a query, after trimming. */
export const MAX_QUERY = 100;

const MARKS = /\p{M}/gu;
const WORD = /[\p{L}\p{N}]+/gu;
const ONE_WORD = /^[\p{L}\p{N}]+$/u;
// Control characters (contract section 1's rule for names: U+0000–U+001F, U+007F) and the C1 range.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/u;

/**
 * Text as search compares it: Unicode NFKD with combining marks removed, lower-cased, and folded
 * again (lower-casing can produce characters that decompose further, "İ" → "i̇").
 */
export function fold(text: string): string {
  const once = text.normalize('NFKD').replace(MARKS, '').toLowerCase();
  return once.normalize('NFKD').replace(MARKS, '');
}

/** A folded word or term, at most MAX_WORD code points. */
const cut = (w: string): string => (w.length <= MAX_WORD ? w : [...w].slice(0, MAX_WORD).join(''));

/** The words of a name as search indexes them: runs of letters and digits of the folded name, each at most 100 code points, each once. */
export function searchWords(name: string): string[] {
  const words = new Set<string>();
  for (const [w] of fold(name).matchAll(WORD)) {
    words.add(cut(w));
  }
  return [...words];
}

/** Whether every term (as searchTerms gives them) begins a word of the name. */
export function nameMatches(name: string, terms: readonly string[]): boolean {
  const words = searchWords(name);
  return terms.every((t) => words.some((w) => w.startsWith(t)));
}

/** A name's words as the engines' indexes hold them: separated by single spaces. */
export const indexedWords = (name: string): string => searchWords(name).join(' ');

/**
 * Why a `q` is refused, as the 400's detail for the field `/q` words it ("must not be empty"), or
 * null when it is a query.
 */
export function queryProblem(q: string): string | null {
  if (CONTROL.test(q)) return 'must not contain control characters';
  const trimmed = q.trim();
  if (trimmed === '') return 'must not be empty';
  if ([...trimmed].length > MAX_QUERY) return `must be at most ${MAX_QUERY} characters`;
  const terms = trimmed.split(/\s+/u);
  if (terms.length > MAX_TERMS) return `must have at most ${MAX_TERMS} terms`;
  if (terms.some((t) => fold(t) === ''))
    return 'must have a letter, digit or symbol besides accents in each term';
  return null;
}

/**
 * The terms a valid `q` (queryProblem null) searches for: each folded and cut as indexed words are
 * (at most 100 code points), a term that another term
 * starts with dropped (every word it would need is needed anyway). `none` when a term holds a
 * character that is no letter or digit: no word has it, so nothing matches (operators and
 * wildcards are taken literally, never as syntax).
 */
export function searchTerms(q: string): string[] | 'none' {
  const folded = q.trim().split(/\s+/u).map(fold);
  if (folded.some((t) => !ONE_WORD.test(t))) return 'none';
  const terms = [...new Set(folded.map(cut))];
  return terms.filter((t) => !terms.some((o) => o !== t && o.startsWith(t)));
}
