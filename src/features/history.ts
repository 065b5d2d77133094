import type { FastifyPluginAsync } from 'fastify';
import { ChangeFeed } from '../events/changes.js';
import { HistoryService } from '../events/history.js';
import type { GardenService } from '../gardens/service.js';
import type { AuthDeps } from '../http/auth.js';
import { changeRoutes } from '../routes/changes.js';
import { historyRoutes } from '../routes/history.js';
import type { Store } from '../store/store.js';

/**
 * What the event log answers besides webhooks and the stream: history and activity (contract
 * 13.3, /plants/{id}/history, /gardens/{gid}/activity) and the change feed (13.4, /plants/changes).
 */
export function historyFeature(store: Store, gardens: GardenService, auth: AuthDeps): FastifyPluginAsync {
  const history = historyRoutes(new HistoryService(store, gardens), auth);
  const changes = changeRoutes(new ChangeFeed(store, gardens), auth);
  return async (app) => {
    await app.register(history);
    await app.register(changes);
  };
}
