import type { FastifyPluginAsync } from 'fastify';
import { HistoryService } from '../events/history.js';
import type { GardenService } from '../gardens/service.js';
import type { AuthDeps } from '../http/auth.js';
import { historyRoutes } from '../routes/history.js';
import type { Store } from '../store/store.js';

/** History and activity (contract 13.3): /plants/{id}/history and /gardens/{gid}/activity. */
export function historyFeature(store: Store, gardens: GardenService, auth: AuthDeps): FastifyPluginAsync {
  return historyRoutes(new HistoryService(store, gardens), auth);
}
