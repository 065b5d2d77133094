import type { Command } from 'commander';
import pino from 'pino';
import type { Config } from '../config.js';
import { Runtime } from '../runtime.js';
import { startTracing } from '../telemetry/tracing.js';
import { configFrom, withConfig } from './options.js';

// Other processes' events wake this one as the store hears of them (onEvents); besides, it looks for
// due retries this often when idle (a claim that finds nothing new writes nothing), and at once
// again whenever a slot frees.
const DELIVER_POLL_MS = 100;

/** `plantstore deliver`: webhook deliveries and nothing else, beside `serve --no-webhook-delivery`. */
export function deliverCommand(program: Command): void {
  const deliver = withConfig(
    program
      .command('deliver')
      .description(
        'send webhook deliveries, and nothing else, until SIGTERM (beside `serve --no-webhook-delivery`; any number may run)',
      ),
    ['database', 'durability', 'logLevel', 'webhookAllowPrivate', 'webhookTimeout', 'webhookRetrySchedule'],
  );
  deliver.action(async (opts: Record<string, unknown>) => {
    await deliverUntilStopped(configFrom(opts));
  });
}

/** A dispatcher of its own (no HTTP), on the store the service writes to, until SIGTERM or SIGINT. */
async function deliverUntilStopped(config: Config): Promise<void> {
  // Traces on: each delivery a client span in the trace of the request that wrote its event.
  const traces = await startTracing();
  const log = pino(
    {
      level: config.logLevel,
      base: { command: 'deliver' },
      ...(traces ? { mixin: () => traces.logFields() } : {}),
    },
    pino.destination({ fd: 2, sync: true }),
  );
  const runtime = await Runtime.open(config, 'deliver', {
    warn: (obj, msg) => log.warn(obj, msg),
    dispatcher: { pollMs: DELIVER_POLL_MS },
  });
  // A commit of this process's own (an attempt recorded, a retry due) may have made more work.
  runtime.deliver();
  log.info({}, 'delivering webhooks');
  // The dispatcher's timers do not hold a process open (a serving one is held by its listener).
  const alive = setInterval(() => {}, 3_600_000);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  clearInterval(alive);
  // What is in flight is sent and recorded (each bounded by the timeout); what was claimed and not
  // sent is claimed again once its lease runs out.
  await runtime.close();
  await traces?.shutdown();
  log.info({}, 'stopped');
}
