import type { Me, PlantStore } from 'plantstore/client';
import { createContext } from 'preact';
import { useContext } from 'preact/hooks';

/** What every view gets: the client, who is signed in, and how to turn a failure into a sentence. */
export interface Api {
  store: PlantStore;
  me: Me;
  /**
   * A sentence for the failure to show; a 401 (the token expired or was revoked) signs out at once
   * and explains why on the sign-in page.
   */
  fail: (err: unknown) => string;
  /** Whether deletes go to the trash (config.json's `trash`): "Undo" is offered only then. */
  trash: boolean;
}

export const ApiContext = createContext<Api | null>(null);

export function useApi(): Api {
  const api = useContext(ApiContext);
  if (!api) throw new Error('useApi outside a session');
  return api;
}
