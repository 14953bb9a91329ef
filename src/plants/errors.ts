/** What the plant domain refuses, in its own words; the edge decides what a client is told (src/http/error-reply.ts). */

export class PlantNotFoundError extends Error {
  constructor(readonly id: bigint) {
    super(`no plant with id ${id}`);
    this.name = 'PlantNotFoundError';
  }
}

/** The id is stored with a different name or tag: creating it again would change data, so it is refused. */
export class PlantConflictError extends Error {
  constructor(readonly id: bigint) {
    super(`a plant with id ${id} already exists with a different name or tag`);
    this.name = 'PlantConflictError';
  }
}
