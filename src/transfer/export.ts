import { plantJson } from '../json/plant-json.js';
import type { PlantStore } from '../storage/plant-store.js';
import { plantPages } from './pages.js';

export interface ExportOptions {
  readonly tag?: string;
  /**
   * Takes one page of JSON lines and resolves once it may be given more (the output has taken it: backpressure);
   * resolves false when the output is gone (a reader that stopped early), which ends the export quietly.
   */
  readonly write: (text: string) => Promise<boolean>;
}

/**
 * Writes every plant (tagged `tag`, when given) as JSON lines in ascending id order, `{"id":…,"name":…,"tag":…}` with
 * the id exact and the tag only when the plant has one: what `plantstore import` reads. One keyset page is read,
 * written and waited for at a time, so memory stays flat whatever the table's size. Resolves with the number of
 * plants written.
 */
export async function exportPlants(store: Pick<PlantStore, 'list'>, options: ExportOptions): Promise<number> {
  let written = 0;
  for await (const page of plantPages(store, options.tag === undefined ? {} : { tag: options.tag })) {
    let text = '';
    for (const plant of page) text += `${plantJson(plant)}\n`;
    if (!(await options.write(text))) break;
    written += page.length;
  }
  return written;
}
