import type { CreateOutcome, PlantListQuery, PlantStore } from '../storage/plant-store.js';
import type { Plant } from '../plant.js';
import { isSamePlant } from './replay.js';
import { PlantConflictError, PlantNotFoundError } from './errors.js';
import type { WriteLane } from './write-lanes.js';
import type { WriteQueue } from './write-queue.js';

export interface PlantPage {
  readonly plants: Plant[];
  /** The cursor of the next page, when more plants remain. */
  readonly nextAfter?: bigint;
}

/** How a create was answered: stored now, an identical replay, a conflict (409), or refused (nothing stored, e.g. 503). */
export type CreateAnswer = 'created' | 'replayed' | 'conflict' | 'refused';

/** What the plant service reports (src/observability/metrics.ts implements it); called once per create, so it must be cheap. */
export interface PlantObserver {
  createAnswered(answer: CreateAnswer): void;
}

const UNOBSERVED: PlantObserver = { createAnswered: () => undefined };

/** What plants may do: create (idempotently), read, list by keyset, delete. It knows no transport. */
export class PlantService {
  readonly #writes: WriteQueue;
  readonly #plants: Pick<PlantStore, 'get' | 'list'>;
  readonly #observer: PlantObserver;

  /** Every write goes through the queue, which admits and batches it; reads go straight to the store. */
  constructor(writes: WriteQueue, plants: Pick<PlantStore, 'get' | 'list'>, observer: PlantObserver = UNOBSERVED) {
    this.#writes = writes;
    this.#plants = plants;
    this.#observer = observer;
  }

  async get(id: bigint): Promise<Plant> {
    const stored = await this.#plants.get(id);
    if (!stored) throw new PlantNotFoundError(id);
    return stored;
  }

  /** One keyset page: one row more than asked for tells whether another page follows, without counting. */
  async list(query: PlantListQuery): Promise<PlantPage> {
    const rows = await this.#plants.list({
      limit: query.limit + 1,
      ...(query.after === undefined ? {} : { after: query.after }),
      ...(query.tag === undefined ? {} : { tag: query.tag }),
    });
    const plants = rows.slice(0, query.limit);
    const last = plants.at(-1);
    return rows.length > query.limit && last ? { plants, nextAfter: last.id } : { plants };
  }

  /**
   * Deleted durably (the store commits before resolving); the id is free to be created again. The delete counts
   * against the write queue's bound, like a create.
   */
  async delete(id: bigint): Promise<void> {
    if (!(await this.#writes.delete(id))) throw new PlantNotFoundError(id);
  }

  /**
   * Creating what is already stored, identically, is a replay and succeeds with the stored plant, so clients may
   * retry safely; the same id with another name or tag is a conflict. `writer` names the client it comes from (an
   * opaque key, such as its address): under contention no writer takes more than its share of the write queue.
   */
  async create(plant: Plant, writer?: string): Promise<Plant> {
    return (await this.createWithOutcome(plant, undefined, writer)).plant;
  }

  /**
   * A stream of creates' way into the write queue (WriteLane): it waits for room instead of being refused, and shares
   * the queue fairly with other streams. Closed by the stream when it ends.
   */
  openLane(): WriteLane {
    return this.#writes.openLane();
  }

  /**
   * A create that also tells whether the plant was stored now (true) or was an identical replay (false); with `lane`,
   * one of a stream's, admitted in the place its lane reserved; with `writer`, counted against that client's share.
   */
  async createWithOutcome(plant: Plant, lane?: WriteLane, writer?: string): Promise<{ readonly plant: Plant; readonly created: boolean }> {
    let outcome: CreateOutcome;
    try {
      outcome = await this.#writes.create(plant, lane, writer);
    } catch (error) {
      this.#observer.createAnswered('refused');
      throw error;
    }
    switch (outcome.kind) {
      case 'created':
        this.#observer.createAnswered('created');
        return { plant, created: true };
      case 'existing':
        // The replay rule is the domain's: the same name and tag is a client's retry, anything else a conflict.
        if (isSamePlant(outcome.stored, plant)) {
          this.#observer.createAnswered('replayed');
          return { plant: outcome.stored, created: false };
        }
        this.#observer.createAnswered('conflict');
        throw new PlantConflictError(plant.id);
      case 'failed':
        this.#observer.createAnswered('refused');
        throw outcome.error;
    }
  }
}
