// What the controller's informer cache costs per 10,000 NodeDisks: whole objects as the API server serves
// them (managedFields and all) against the controller's lean copies (controller/cache.ts), from 20 parses
// of one real page of 500. Run by bench/scale-controller.ts in a process of its own: measured inside a
// process that had just created and listed 50,000 NodeDisks, heapUsed after gc() counted that process's
// own leftovers too.
//   node bench/cache-heap.ts <page.json>     (a JSON array of NodeDisks)
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { leanNodeDisk } from '../controller/cache.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const used = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
};
const text = readFileSync(process.argv[2]!, 'utf8');
const pages = () => Array.from({ length: 20 }, () => JSON.parse(text) as NodeDisk[]).flat();
const perTenThousand = 10_000 / pages().length;

// What is measured is kept here; each copy is made inside a function of its own, so that no stale
// interpreter register of the caller keeps the parsed pages alive through the measurement (it did when
// this was straight-line code, and the lean copies seemed to cost more than whole objects: docs/benchmarks.md).
let kept: NodeDisk[] = [];
function heapOf(fill: () => NodeDisk[]): number {
  kept = [];
  const base = used();
  kept = fill();
  return (used() - base) * perTenThousand;
}
const wholeMiB = heapOf(pages);
const leanMiB = heapOf(() => pages().map(leanNodeDisk));
const jsonCopyMiB = heapOf(() => pages().map((nd) => JSON.parse(JSON.stringify(leanNodeDisk(nd))) as NodeDisk));
const structuredCloneMiB = heapOf(() => pages().map((nd) => structuredClone(leanNodeDisk(nd))));
console.log(JSON.stringify({ wholeMiB, leanMiB, jsonCopyMiB, structuredCloneMiB, copies: kept.length }));
