/**
 * Plants as the read tests write and check them, through the app in-process and straight from its store: the ids
 * where int64 exactness is lost (both ends, and past a double), the exact JSON the service must write, and the store's
 * whole content.
 */
import assert from 'node:assert/strict';
import type { TestApp } from './app.js';

export const INT64_MAX = '9223372036854775807';
export const INT64_MIN = '-9223372036854775808';
/** 2^53 + 1: the first integer a double cannot hold. */
export const PAST_DOUBLE = '9007199254740993';

/** The plant JSON the service must write: ids spelled exactly, tag only when present. */
export function plantJson(id: string, name: string, tag?: string): string {
  return `{"id":${id},"name":${JSON.stringify(name)}${tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`}}`;
}

/** Creates a plant on a listening server (`base`, its origin) with `token`, its id sent exactly; fails unless 200. */
export async function createOverHttp(base: string, token: string, id: string, name: string): Promise<void> {
  const response = await fetch(`${base}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: plantJson(id, name),
  });
  assert.equal(response.status, 200, await response.text());
}

/** Every plant currently stored, in order, straight from the store. */
export async function storedIds(t: TestApp): Promise<bigint[]> {
  return (await t.store.plants.list({ limit: 1_000_000 })).map((plant) => plant.id);
}

/** Deletes every stored plant straight from the store: each test of a suite sharing one database starts empty. */
export async function deleteAllPlants(t: TestApp): Promise<void> {
  for (const id of await storedIds(t)) await t.store.plants.delete(id);
}
