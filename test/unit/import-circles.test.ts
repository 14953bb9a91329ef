/**
 * src/ has no import circle (docs/design.md#layers): lint holds the layers apart, and this holds what lint cannot see,
 * a circle within a layer or a folder (src/serve/server.ts ↔ src/workers/instance.ts was one), and a circle between
 * folders seen as wholes, the view a reader of the tree takes (storage/ importing the Plant type from plants/ while
 * plants/ imports storage/ was one). Every import counts, type-only, re-exports and dynamic import() included, as
 * TypeScript's own pre-processor lists them.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../src');

/** Each module of src/ (relative to it) and the modules of src/ it imports. */
function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of (fs.readdirSync(root, { recursive: true }) as string[]).filter((name) => name.endsWith('.ts')).sort()) {
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(path.join(root, file), 'utf8'), true, true);
    const imported = importedFiles
      .map(({ fileName }) => fileName)
      .filter((name) => name.startsWith('.'))
      .map((name) => path.normalize(path.join(path.dirname(file), name.replace(/\.js$/, '.ts'))));
    graph.set(file, imported);
  }
  return graph;
}

/** The same graph with each folder of src/ as one node (a top-level module is its own), and no edge to itself. */
function folderGraph(graph: Map<string, string[]>): Map<string, string[]> {
  const folderOf = (module: string) => module.split(path.sep)[0] as string;
  const folders = new Map<string, Set<string>>();
  for (const [module, imported] of graph) {
    const from = folderOf(module);
    const targets = folders.get(from) ?? new Set<string>();
    for (const next of imported) if (graph.has(next) && folderOf(next) !== from) targets.add(folderOf(next));
    folders.set(from, targets);
  }
  return new Map([...folders].map(([folder, targets]) => [folder, [...targets].sort()]));
}

/** The circles of a graph: each strongly connected component of more than one module, or a module importing itself (Tarjan). */
function circles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (module: string) => {
    index.set(module, index.size);
    low.set(module, index.get(module) as number);
    stack.push(module);
    onStack.add(module);
    for (const next of graph.get(module) ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) {
        visit(next);
        low.set(module, Math.min(low.get(module) as number, low.get(next) as number));
      } else if (onStack.has(next)) low.set(module, Math.min(low.get(module) as number, index.get(next) as number));
    }
    if (low.get(module) !== index.get(module)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop() as string;
      onStack.delete(member);
      component.push(member);
    } while (member !== module);
    if (component.length > 1 || graph.get(module)?.includes(module)) found.push(component.sort());
  };
  for (const module of graph.keys()) if (!index.has(module)) visit(module);
  return found;
}

describe('the imports of src/', () => {
  it('make no circle', () => {
    const graph = importGraph(SRC);
    assert.ok(graph.size > 100 && graph.get('services.ts')?.includes('plants/service.ts'), 'the graph is read: services.ts imports plants/service.ts');
    assert.deepEqual(circles(graph), []);
  });

  it('make no circle between folders', () => {
    const folders = folderGraph(importGraph(SRC));
    assert.ok(folders.get('storage')?.includes('plant.ts') && folders.get('plants')?.includes('storage'), 'the folder graph is read');
    assert.deepEqual(circles(folders), []);
  });

  it('would see one between folders (the check itself)', () => {
    const graph = new Map([
      ['plants/service.ts', ['storage/store.ts']],
      ['plants/plant.ts', []],
      ['storage/store.ts', ['plants/plant.ts']],
    ]);
    assert.deepEqual(circles(graph), []);
    assert.deepEqual(circles(folderGraph(graph)), [['plants', 'storage']]);
  });

  it('would see one (the check itself)', () => {
    const graph = new Map([
      ['serve/server.ts', ['workers/instance.ts']],
      ['workers/instance.ts', ['serve/server.ts']],
      ['app.ts', ['serve/server.ts']],
    ]);
    assert.deepEqual(circles(graph), [['serve/server.ts', 'workers/instance.ts']]);
  });
});
