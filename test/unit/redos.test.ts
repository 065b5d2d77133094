// Every regular expression in src/ must run in time linear in its input: most meet request
// input (a query parameter, a body field, a header, a JSON parser's message that quotes the
// body) and a polynomial one lets a client spend the event loop. The expressions
// are found by reading the sources, so a new one is checked without anyone listing it; each
// goes to recheck (a ReDoS checker), in its pure-JavaScript backend so that the test needs
// neither Java nor a native binary. An expression the scan cannot read as a constant fails too.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import ts from 'typescript';

process.env.RECHECK_BACKEND = 'pure';
const { check } = await import('recheck');

const root = resolve(import.meta.dirname, '../..');
const srcDir = join(root, 'src');

// Ajv compiles a schema's `pattern` with the `u` flag (its default unicodeRegExp).
const PATTERN_FLAGS = 'u';

interface Found {
  where: string;
  source: string | null;
  flags: string;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts')
        ? [join(dir, e.name)]
        : [],
  );
}

function scan(): Found[] {
  const files = sources(srcDir);
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
  });
  const checker = program.getTypeChecker();
  const constant = (e: ts.Expression | undefined): string | null => {
    if (e === undefined) return null;
    if (ts.isStringLiteralLike(e)) return e.text;
    const t = checker.getTypeAtLocation(e);
    return t.isStringLiteral() ? t.value : null;
  };
  const found: Found[] = [];
  for (const file of files) {
    const sf = program.getSourceFile(file);
    assert.ok(sf, file);
    const at = (n: ts.Node) => {
      const { line } = sf.getLineAndCharacterOfPosition(n.getStart(sf));
      return `${relative(root, file)}:${line + 1}`;
    };
    const visit = (n: ts.Node): void => {
      if (ts.isRegularExpressionLiteral(n)) {
        const end = n.text.lastIndexOf('/');
        found.push({ where: at(n), source: n.text.slice(1, end), flags: n.text.slice(end + 1) });
      } else if (
        (ts.isNewExpression(n) || ts.isCallExpression(n)) &&
        ts.isIdentifier(n.expression) &&
        n.expression.text === 'RegExp'
      ) {
        const [pattern, flags] = n.arguments ?? [];
        found.push({ where: at(n), source: constant(pattern), flags: flags ? (constant(flags) ?? '') : '' });
      } else if (
        ts.isPropertyAssignment(n) &&
        (ts.isIdentifier(n.name) || ts.isStringLiteral(n.name)) &&
        n.name.text === 'pattern'
      ) {
        found.push({ where: at(n), source: constant(n.initializer), flags: PATTERN_FLAGS });
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return found;
}

const found = scan();

test('the scan finds the schemas’ patterns and the code’s regular expressions', () => {
  // A floor, not a count: the scan must keep seeing both kinds, wherever they are.
  assert.ok(found.filter((f) => f.where.startsWith('src/schemas/')).length >= 4, JSON.stringify(found));
  assert.ok(found.filter((f) => f.flags !== PATTERN_FLAGS).length >= 10, JSON.stringify(found));
});

test('every regular expression in src/ is a constant', () => {
  const unread = found.filter((f) => f.source === null).map((f) => f.where);
  assert.deepEqual(unread, [], 'write these as constants so that they can be checked');
});

// recheck gives each check 10 s by default and calls one that takes longer `unknown (timeout)`: on a
// loaded machine a check of a safe pattern did. No limit per check; the test's own bounds the whole.
test('every regular expression in src/ runs in linear time (recheck: safe)', {
  timeout: 180_000,
}, async () => {
  const unsafe: string[] = [];
  for (const f of found) {
    if (f.source === null) continue;
    const d = await check(f.source, f.flags, { timeout: null });
    if (d.status !== 'safe') {
      const why = d.status === 'vulnerable' ? d.complexity.summary : d.error.kind;
      unsafe.push(`${f.where} /${f.source}/${f.flags}: ${d.status} (${why})`);
    }
  }
  assert.deepEqual(unsafe, []);
});
