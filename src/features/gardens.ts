import type { FastifyPluginAsync } from 'fastify';
import type { GardenService } from '../gardens/service.js';
import type { AuthDeps } from '../http/auth.js';
import { gardenRoutes } from '../routes/gardens.js';
import type { Tag } from './docs.js';

export const GARDEN_TAGS: Tag[] = [
  {
    name: 'gardens',
    description: 'Gardens and their members: plants shared with viewers, editors and owners',
  },
];

/** Gardens and their members: /gardens and /gardens/{gid}/members. */
export function gardensFeature(gardens: GardenService, auth: AuthDeps): FastifyPluginAsync {
  return gardenRoutes(gardens, auth);
}
