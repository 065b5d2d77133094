import type { FastifyPluginAsync } from 'fastify';
import type { GardenService } from '../gardens/service.js';
import type { AuthDeps } from '../http/auth.js';
import { type ExportLimits, PlantService } from '../plants/service.js';
import { plantRoutes } from '../routes/plants.js';
import type { Store } from '../store/store.js';
import type { Tag } from './docs.js';

export const PLANT_TAGS: Tag[] = [{ name: 'plants', description: 'The plant API' }];

export interface PlantsOptions {
  store: Store;
  gardens: GardenService;
  auth: AuthDeps;
  /** Told after a change and its event have committed in this process (the store's onEvents tells the streams). */
  onEvent?: () => void;
  /** Bytes of rendered pages kept (ListCache); 0: none. */
  listCacheBytes?: number;
  /** Exports running at once (PlantService.export); none given: no limit. */
  exports?: ExportLimits;
  /** Milliseconds a deleted plant waits in the trash; 0 or none: a delete is final. */
  trashRetention?: number;
}

/** The plant API: /plants and /gardens/{gid}/plants. */
export function plantsFeature(opts: PlantsOptions): FastifyPluginAsync {
  const service = new PlantService(
    opts.store,
    opts.gardens,
    undefined,
    opts.onEvent,
    opts.exports,
    opts.trashRetention,
  );
  return plantRoutes(service, opts.auth, opts.listCacheBytes);
}
