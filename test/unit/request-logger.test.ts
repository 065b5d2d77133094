import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { RequestLogger } from '../../src/http/request-logger.js';

/** A pino logger writing into an array, with a fixed time so lines compare exactly. */
function capture(level: string) {
  const lines: string[] = [];
  const logger = pino(
    {
      level,
      timestamp: () => ',"time":0',
      redact: { paths: ['req.headers.authorization'], censor: '[redacted]' },
    },
    { write: (l: string) => void lines.push(l) },
  );
  return { logger, lines };
}

describe('request logger (a pino child made only when a line is written)', () => {
  it('writes exactly the lines a pino child would, bindings and redaction included', () => {
    const a = capture('info');
    const b = capture('info');
    const lazy = new RequestLogger(a.logger, { requestId: 'r-1' }, {});
    const child = b.logger.child({ requestId: 'r-1' }, {});
    for (const log of [lazy, child]) {
      log.info({ req: { headers: { authorization: 'Bearer secret' } } }, 'incoming request');
      log.error({ err: new Error('boom') }, 'request failed');
      log.warn('plain %s', 'message');
      log.debug('not at info');
      log.child({ extra: 1 }).info('from a grandchild');
    }
    assert.equal(a.lines.length, 4);
    assert.deepEqual(a.lines, b.lines);
    assert.ok(a.lines.every((l) => JSON.parse(l).requestId === 'r-1'));
    assert.ok(!a.lines.join('').includes('secret'));
  });

  it('makes no child while nothing is logged at an enabled level', () => {
    const { logger, lines } = capture('warn');
    let children = 0;
    const counting = Object.create(logger, {
      child: {
        value: (...args: Parameters<typeof logger.child>) => {
          children++;
          return logger.child(...args);
        },
      },
    });
    const lazy = new RequestLogger(counting, { requestId: 'r-2' }, {});
    lazy.info('incoming request');
    lazy.debug('detail');
    lazy.trace('more detail');
    assert.equal(children, 0);
    assert.equal(lines.length, 0);
    lazy.warn('now something');
    lazy.error('and again');
    assert.equal(children, 1, 'one child, made on the first enabled line');
    assert.equal(lines.length, 2);
  });

  it("follows a route's own level and the parent's, and a level set on it", () => {
    const { logger, lines } = capture('info');
    const quiet = new RequestLogger(logger, { requestId: 'r-3' }, { level: 'warn' });
    assert.equal(quiet.level, 'warn');
    assert.equal(quiet.isLevelEnabled('info'), false);
    assert.equal(quiet.isLevelEnabled('error'), true);
    quiet.info('dropped');
    assert.equal(lines.length, 0);

    const plain = new RequestLogger(logger, { requestId: 'r-4' }, {});
    assert.equal(plain.level, 'info');
    logger.level = 'error';
    plain.warn('dropped, the parent is at error now');
    assert.equal(lines.length, 0);
    plain.level = 'debug';
    plain.debug('kept');
    assert.equal(lines.length, 1);
    assert.equal(JSON.parse(lines[0]!).msg, 'kept');
    assert.equal(plain.isLevelEnabled('no-such-level'), false);
  });
});
