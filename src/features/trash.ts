import type { FastifyPluginAsync } from 'fastify';
import type { GardenService } from '../gardens/service.js';
import type { AuthDeps } from '../http/auth.js';
import { trashRoutes } from '../routes/trash.js';
import type { Store } from '../store/store.js';
import { TrashService } from '../trash/service.js';
import type { Tag } from './docs.js';

export const TRASH_TAGS: Tag[] = [
  { name: 'trash', description: 'Deleted plants, kept for `TRASH_RETENTION` to be restored' },
];

/**
 * The trash (contract 13.2): GET /trash, POST /trash/{id}/restore, DELETE /trash/{id}. Deletes put
 * plants in it (the plants feature); the service's purge of expired entries runs with the other
 * purges (Runtime.purge).
 */
export function trashFeature(store: Store, gardens: GardenService, auth: AuthDeps): FastifyPluginAsync {
  return trashRoutes(new TrashService(store, gardens), auth);
}
