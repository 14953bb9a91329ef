/**
 * Plants as the read tests write and check them, through the app in-process and straight from its store: the ids
 * where int64 exactness is lost (both ends, and past a double), the exact JSON the service must write, and the store's
 * whole content.
 */
import type { TestApp } from './app.js';

export const INT64_MAX = '9223372036854775807';
export const INT64_MIN = '-9223372036854775808';
/** 2^53 + 1: the first integer a double cannot hold. */
export const PAST_DOUBLE = '9007199254740993';

/** The plant JSON the service must write: ids spelled exactly, tag only when present. */
export function plantJson(id: string, name: string, tag?: string): string {
  return `{"id":${id},"name":${JSON.stringify(name)}${tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`}}`;
}

/** Every plant currently stored, in order, straight from the store. */
export async function storedIds(t: TestApp): Promise<bigint[]> {
  return (await t.store.plants.list({ limit: 1_000_000 })).map((plant) => plant.id);
}

/** Deletes every stored plant straight from the store: each test of a suite sharing one database starts empty. */
export async function deleteAllPlants(t: TestApp): Promise<void> {
  for (const id of await storedIds(t)) await t.store.plants.delete(id);
}
