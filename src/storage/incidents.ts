import type { StorageIncident } from './store.js';

/**
 * Incidents a store reports, handed to whoever listens (the app, which logs them). Those reported before anyone
 * listens (between opening the store and building the app) are kept, up to UNHEARD_LIMIT, and given to the first
 * listener, so an incident at start is not lost.
 */
export class Incidents {
  static readonly UNHEARD_LIMIT = 100;
  readonly #listeners = new Set<(incident: StorageIncident) => void>();
  #unheard: StorageIncident[] = [];

  report(incident: StorageIncident): void {
    if (this.#listeners.size === 0) {
      if (this.#unheard.length < Incidents.UNHEARD_LIMIT) this.#unheard.push(incident);
      return;
    }
    for (const listener of this.#listeners) listener(incident);
  }

  listen(listener: (incident: StorageIncident) => void): () => void {
    this.#listeners.add(listener);
    for (const incident of this.#unheard.splice(0)) listener(incident);
    return () => {
      this.#listeners.delete(listener);
    };
  }
}
