import type { FastifyInstance } from 'fastify';
import sjson from 'secure-json-parse';
import { AppError, BadRequestError } from '../errors.js';
import { illFormedAt } from '../text-rules.js';

// JSON is UTF-8 (RFC 8259 8.1): a byte sequence that is not UTF-8 is refused, never replaced with
// U+FFFD and stored. A BOM is left to secure-json-parse, which skips it, as before.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
// Decoded UTF-8 holds no lone surrogate: only a \uD800–\uDFFF escape can make one, so only a body
// with such an escape is walked.
const SURROGATE_ESCAPE = /\\u[dD][89abcdefABCDEF]/;

/**
 * JSON bodies through secure-json-parse (as Fastify's default parser), but with errors that say
 * what is wrong: not UTF-8, empty, not JSON, carrying prototype-pollution keys, or holding a string
 * that is not valid Unicode (a lone surrogate: echoed as sent, it would be read back as U+FFFD).
 */
export function registerBodyParsers(app: FastifyInstance): void {
  // Any other type reaches a parser only on routes that ignore bodies (POST checks its type first).
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, _body, done) => done(null, undefined));
  app.removeContentTypeParser('application/json');
  // A JSON Merge Patch (RFC 7396) is JSON.
  app.addContentTypeParser(
    ['application/json', 'application/merge-patch+json'],
    { parseAs: 'buffer' },
    (request, body, done) => {
      // Only POST, PATCH and PUT take a body; clients that label every request as JSON are not punished for it.
      const m = request.method;
      if (m !== 'POST' && m !== 'PATCH' && m !== 'PUT') return done(null, undefined);
      let text: string;
      try {
        text = utf8.decode(body as Buffer);
      } catch {
        return done(
          new AppError(400, 'invalid_json', 'request body is not valid UTF-8: JSON must be sent as UTF-8'),
          undefined,
        );
      }
      if (text.trim() === '')
        return done(new AppError(400, 'invalid_json', 'request body must not be empty'), undefined);
      let value: unknown;
      try {
        value = sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' });
      } catch (err) {
        const message = (err as Error).message;
        if (/prototype/i.test(message)) {
          return done(
            new AppError(
              400,
              'invalid_json',
              'request body must not contain __proto__ or constructor.prototype keys',
            ),
            undefined,
          );
        }
        // V8 quotes a piece of the body around the error ("…pst_abc…" is not valid JSON): a secret
        // pasted into a broken body would come back in the answer. Say where, never what.
        const where = withoutQuote(message).replace(/ in JSON /, ' ');
        return done(new AppError(400, 'invalid_json', `request body is not valid JSON: ${where}`), undefined);
      }
      const bad = SURROGATE_ESCAPE.test(text) ? illFormedAt(value) : null;
      if (bad !== null) {
        const label = bad.field === '' ? 'request body' : bad.field.slice(1);
        return done(new BadRequestError('invalid_body', `${label} ${bad.message}`, [bad]), undefined);
      }
      done(null, value);
    },
  );
}

const NOT_VALID = ' is not valid JSON';

/**
 * V8's message without the piece of the body it quotes: `Unexpected token 'x', "…" is not valid
 * JSON` (or `"…"... is not valid JSON`) becomes `Unexpected token 'x'`; any other message is kept.
 * What /,? *"[\s\S]*"(?:\.\.\.)? is not valid JSON$/ removed, in time linear in the message (that
 * expression took time quadratic in it).
 */
function withoutQuote(message: string): string {
  const close = message.endsWith(`"${NOT_VALID}`)
    ? message.length - NOT_VALID.length - 1
    : message.endsWith(`"...${NOT_VALID}`)
      ? message.length - NOT_VALID.length - 4
      : -1;
  let start = message.indexOf('"');
  if (close < 0 || start === close) return message;
  while (start > 0 && message[start - 1] === ' ') start--;
  if (start > 0 && message[start - 1] === ',') start--;
  return message.slice(0, start);
}
