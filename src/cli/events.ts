import { randomBytes } from 'node:crypto';
import type { Command } from 'commander';
import { type PlantEvent, signWebhook } from '../client/index.js';
import { UsageError } from '../usage-error.js';
import { type ClientOpts, connect, out, withClient } from './client.js';

/** `plantstore events tail`: the live stream of a running service, optionally forwarded. */
export function eventCommands(program: Command): void {
  const events = program.command('events').description('the live stream of plant events');
  withClient(
    events
      .command('tail')
      .description('print events as they happen (resuming after a lost connection); Ctrl-C stops')
      .option(
        '--forward-to <url>',
        'also POST each event to this URL, signed as Standard Webhooks deliveries are, with a secret printed at start',
      )
      .option('--last-event-id <id>', 'start right after this event'),
  ).action(async (o: ClientOpts & { forwardTo?: string; lastEventId?: string }) => {
    if (
      o.forwardTo !== undefined &&
      (!URL.canParse(o.forwardTo) || !/^https?:$/.test(new URL(o.forwardTo).protocol))
    ) {
      throw new UsageError('--forward-to must be an http(s) URL like http://127.0.0.1:8080/hook');
    }
    const store = connect(o);
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    if (o.forwardTo) {
      process.stderr.write(`forwarding events to ${o.forwardTo}\nsigning secret: ${secret}\n`);
    }
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      for await (const e of store.events({
        signal: stop.signal,
        onOpen: () => process.stderr.write('connected: streaming events as they commit\n'),
        ...(o.lastEventId ? { lastEventId: o.lastEventId } : {}),
      })) {
        out(o.json ? JSON.stringify(e) : `${e.id}\t${e.type}\t${JSON.stringify(e.data)}`);
        if (o.forwardTo) await forward(o.forwardTo, secret, e);
      }
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  });
}

/** POSTs one event to a local receiver as a Standard Webhooks delivery; reports the outcome on stderr. */
async function forward(url: string, secret: string, e: PlantEvent): Promise<void> {
  const { id, ...payload } = e;
  const body = JSON.stringify(payload);
  const timestamp = Math.floor(Date.now() / 1000);
  try {
    const res = await fetch(url, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': await signWebhook(secret, id, timestamp, body),
      },
      body,
      signal: AbortSignal.timeout(15_000),
    });
    await res.body?.cancel();
    process.stderr.write(`${id} → ${res.status}\n`);
  } catch (err) {
    process.stderr.write(`${id} → not delivered: ${(err as Error).message}\n`);
  }
}
