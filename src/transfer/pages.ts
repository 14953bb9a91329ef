import type { PlantStore } from '../storage/plant-store.js';
import type { Plant } from '../plant.js';

/** Plants read per keyset query: memory holds a page or two, whatever the table's size. */
const READ_PAGE_SIZE = 1000;

/**
 * Every plant of `store` in ascending id order, one keyset page at a time (`id > last id of the previous page`), only
 * those tagged `tag` when given. A page costs one indexed range scan however deep it is. Plants created or deleted
 * while the walk goes on may or may not be seen; a plant present throughout is seen exactly once.
 */
export async function* plantPages(
  store: Pick<PlantStore, 'list'>,
  options: { readonly tag?: string; readonly pageSize?: number } = {},
): AsyncGenerator<Plant[]> {
  const limit = options.pageSize ?? READ_PAGE_SIZE;
  let after: bigint | undefined;
  for (;;) {
    const page = await store.list({
      limit,
      ...(after === undefined ? {} : { after }),
      ...(options.tag === undefined ? {} : { tag: options.tag }),
    });
    if (page.length > 0) yield page;
    const last = page.at(-1);
    if (page.length < limit || last === undefined) return;
    after = last.id;
  }
}

/** Walks plantPages one plant at a time, for comparing two stores side by side. */
export class PlantCursor {
  readonly #pages: AsyncGenerator<Plant[]>;
  #page: Plant[] = [];
  #index = 0;
  #done = false;

  constructor(store: Pick<PlantStore, 'list'>) {
    this.#pages = plantPages(store);
  }

  /** The plant at the cursor; undefined once every plant has been passed. */
  async current(): Promise<Plant | undefined> {
    while (this.#index >= this.#page.length && !this.#done) {
      const next = await this.#pages.next();
      if (next.done) this.#done = true;
      else {
        this.#page = next.value;
        this.#index = 0;
      }
    }
    return this.#page[this.#index];
  }

  advance(): void {
    this.#index += 1;
  }
}
