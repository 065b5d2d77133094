import type { FastifyInstance } from 'fastify';
import sjson from 'secure-json-parse';
import { AppError } from '../errors.js';

/**
 * JSON bodies through secure-json-parse (as Fastify's default parser), but with errors that say
 * what is wrong: empty, not JSON, or carrying prototype-pollution keys.
 */
export function registerJsonParser(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string;
    if (text.trim() === '')
      return done(new AppError(400, 'invalid_json', 'request body must not be empty'), undefined);
    try {
      done(null, sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' }));
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
      done(new AppError(400, 'invalid_json', `request body is not valid JSON: ${message}`), undefined);
    }
  });
}
