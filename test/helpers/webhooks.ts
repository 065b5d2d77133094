// What the route tests of webhooks share: registering an endpoint, reading its deliveries log and
// waiting for deliveries at a receiver.
import assert from 'node:assert/strict';
import type { Client } from './app.js';
import type { Received, Receiver } from './receiver.js';
import { until } from './wait.js';

/** An endpoint as POST /webhooks returns it (the secret only then). */
export interface Registered {
  id: string;
  secret: string;
  url: string;
  events: string[];
  status: string;
}

/** Registers an endpoint of the caller's with this body (201 asserted). */
export async function register(c: Client, body: Record<string, unknown>): Promise<Registered> {
  const res = await c.request({
    method: 'POST',
    url: '/webhooks',
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  assert.equal(res.statusCode, 201, res.body);
  return res.json();
}

/** One attempt of a delivery, as the deliveries log shows it. */
export interface Attempt {
  eventId: string;
  eventType: string;
  attempt: number;
  status: number | null;
  outcome: 'succeeded' | 'retrying' | 'failed';
  error?: string | null;
}

/** The endpoint's deliveries log, newest first (200 asserted). */
export async function attempts(c: Client, endpointId: string): Promise<Attempt[]> {
  const res = await c.request({ method: 'GET', url: `/webhooks/${endpointId}/deliveries` });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

/** Waits until the deliveries log shows an acknowledged attempt of each of these events; returns the log. */
export function acknowledged(c: Client, endpointId: string, eventIds: string[]): Promise<Attempt[]> {
  return until(`acknowledged attempts of ${eventIds.join(', ')} in the log of ${endpointId}`, async () => {
    const log = await attempts(c, endpointId);
    const done = new Set(log.filter((a) => a.outcome === 'succeeded').map((a) => a.eventId));
    return eventIds.every((id) => done.has(id)) && log;
  });
}

/** The event id a delivery carries (its webhook-id header). */
export const eventId = (d: Received) => d.headers['webhook-id'] as string;

/** The name of the plant a delivery's event is about. */
export const plantName = (d: Received): string => JSON.parse(d.body).data.name;

/** Waits until the receiver holds a delivery of this type for the plant of this name. */
export const delivered = (r: Receiver, type: string, name: string): Promise<Received> =>
  until(`${type} of ${name} at the receiver`, () =>
    r.received.find((d) => JSON.parse(d.body).type === type && plantName(d) === name),
  );

/** Waits until the receiver holds a membership event of this type about this user. */
export const deliveredMember = (r: Receiver, type: string, user: string): Promise<Received> =>
  until(`${type} of ${user} at the receiver`, () =>
    r.received.find((d) => JSON.parse(d.body).type === type && JSON.parse(d.body).data.user === user),
  );
