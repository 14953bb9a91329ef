/**
 * The V8 heap limits the child Node of `plantstore export`, `import` and `copy` starts with (src/cli/launcher.ts).
 *
 * The young generation's semi-space is what grew most: V8 widens it while allocation runs fast, and a wide one also
 * promotes more short-lived rows into the old generation. The old-generation cap leaves room for the largest input
 * line and batch the limits allow, and still stops the heap from growing with the row count.
 */
export const BOUNDED_HEAP_FLAGS: readonly string[] = ['--max-old-space-size=128', '--max-semi-space-size=2'];
