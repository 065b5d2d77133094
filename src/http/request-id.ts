import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const INCOMING_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** Keeps a well-formed incoming X-Request-Id, otherwise makes one. */
export function genReqId(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && INCOMING_ID.test(incoming) ? incoming : randomUUID();
}
