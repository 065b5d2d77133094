/**
 * Statements planned once. SQLite (3.54, the one better-sqlite3 13 builds) plans some statements
 * with the values bound to their parameters, and marks such a statement to be prepared again
 * whenever a new value is bound to one of those parameters: a `LIMIT ?`, and a `?` the planner
 * compared with a partial index's condition (`garden = ?` on `plants`, whose tag indexes are
 * partial, is one). better-sqlite3 binds every value on every run, so those statements were
 * parsed and planned again on every call: about 23 of the 35 µs of one garden's page statement
 * (docs/benchmarks.md, "Where one request's CPU goes").
 *
 * A parameter under a unary plus (`+?`, `+@name`) is an expression the planner does not look
 * into, and evaluates to the same value with the same affinity rules (an operand without affinity,
 * as a bare parameter is): the statement is planned once, as if its values were unknown, which is
 * how every statement here was written to be planned (its indexes named by its shape, never by a
 * value). A partial index whose condition names a value (`WHERE state = 'pending'`) is still used
 * where the statement writes that value as a literal, as every statement here does.
 *
 * FTS5 prepares statements of its own, which no SQL of ours reaches; the one it looks a term up in
 * each segment with is prepared again whenever the segment number bound is 0 or 1 or was, so on
 * every search while the index has a segment 1. The extension in stable-plans.c turns on SQLite's
 * planner stability guarantee (SQLITE_DBCONFIG_ENABLE_QPSG) for the connection, which ends that:
 * better-sqlite3 has no API for the setting, and an extension it loads is handed the connection.
 */

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';

/**
 * The SQLite extension that turns on the planner's stability guarantee (stable-plans.c, built by
 * `npm run build` into dist/ beside this module's compiled form; the same file when this module
 * runs from src/).
 */
export const EXTENSION_FILE = join(
  import.meta.dirname,
  '../../..',
  'dist/store/sqlite',
  // SQLite finds the extension's entry point (sqlite3_plantstore_init) from the file's name.
  `plantstore.${process.platform === 'darwin' ? 'dylib' : 'so'}`,
);
const EXTENSION = existsSync(EXTENSION_FILE) ? EXTENSION_FILE : null;

/**
 * Makes every statement `db` prepares from now on planned once (planOnce), and the statements
 * SQLite's own extensions prepare (FTS5's) too, with the extension when it was built; answers
 * whether it was (without it the service works the same, searches a little dearer).
 */
export function planStatementsOnce(db: Database.Database): boolean {
  const prepare = db.prepare.bind(db);
  db.prepare = ((sql: string) => prepare(planOnce(sql))) as typeof db.prepare;
  if (EXTENSION === null) return false;
  try {
    db.loadExtension(EXTENSION);
    return true;
  } catch (err) {
    // Built for another machine (a dist/ copied across platforms): the store runs without it.
    if (!warned) {
      warned = true;
      process.emitWarning(
        `the SQLite extension ${EXTENSION} did not load (${(err as Error).message}); the store runs without it, its searches dearer`,
        'PlantstoreWarning',
      );
    }
    return false;
  }
}
let warned = false;

/** `sql` with every parameter (`?`, `?NNN`, `@name`, `:name`, `$name`) behind a unary plus. */
export function planOnce(sql: string): string {
  let out = '';
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    // Quoted strings and names ('' and "" escape their quote), and comments, unchanged.
    if (c === "'" || c === '"' || c === '`') {
      let j = i + 1;
      for (;;) {
        const k = sql.indexOf(c, j);
        if (k < 0) {
          j = sql.length;
          break;
        }
        if (sql[k + 1] === c) j = k + 2;
        else {
          j = k + 1;
          break;
        }
      }
      out += sql.slice(i, j);
      i = j;
    } else if (c === '[') {
      // A name quoted the way SQL Server does, which SQLite takes too.
      const k = sql.indexOf(']', i + 1);
      const j = k < 0 ? sql.length : k + 1;
      out += sql.slice(i, j);
      i = j;
    } else if (c === '-' && sql[i + 1] === '-') {
      const k = sql.indexOf('\n', i);
      const j = k < 0 ? sql.length : k;
      out += sql.slice(i, j);
      i = j;
    } else if (c === '/' && sql[i + 1] === '*') {
      const k = sql.indexOf('*/', i + 2);
      const j = k < 0 ? sql.length : k + 2;
      out += sql.slice(i, j);
      i = j;
    } else if (isParameterStart(sql, i)) {
      let j = i + 1;
      while (j < sql.length && /\w/.test(sql[j]!)) j++;
      out += `+${sql.slice(i, j)}`;
      i = j;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** Whether a parameter begins at `i`: `?`, or `@`, `:` or `$` before a name. */
function isParameterStart(sql: string, i: number): boolean {
  const c = sql[i];
  if (c === '?') return true;
  if (c !== '@' && c !== ':' && c !== '$') return false;
  const next = sql[i + 1];
  return next !== undefined && /[A-Za-z_]/u.test(next);
}
