import type { FastifyRequest } from 'fastify';

// Query parameters that carry credentials in other APIs; a client may send one here by mistake.
const SECRET_PARAM =
  /([?&](?:access_token|token|api_key|apikey|key|auth|authorization|password|secret)=)[^&#]*/gi;
const TOKEN = /pst_[A-Za-z0-9_-]+/g;

/** The URL as logged: a token a client put in the query string (where it is refused) is masked. */
export function redactUrl(url: string): string {
  return url.replace(SECRET_PARAM, '$1[redacted]').replace(TOKEN, 'pst_[redacted]');
}

/** pino serializers: Fastify's request fields, with the URL redacted. */
export const logSerializers = {
  req(req: FastifyRequest) {
    return {
      method: req.method,
      url: redactUrl(req.url),
      host: req.host,
      remoteAddress: req.ip,
      remotePort: req.socket?.remotePort,
    };
  },
};
