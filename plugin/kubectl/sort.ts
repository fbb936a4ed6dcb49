// --sort-by as kubectl does it: by the first value the JSONPath reaches; objects without one come
// first; numbers by value, strings byte by byte. kubectl sorts with Go's sort.Sort, which for the short
// lists people read (≤ 12 items) is an insertion sort whose "missing is less" rule reverses the order of
// the objects missing the field: reproduced here so the output is the same; longer lists are sorted
// stably (Go's order among equal items there is an accident of its algorithm).
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { evaluate, relaxedPath } from './jsonpath.ts';
import { usageError } from '../errors.ts';

export function sortItems(items: NodeDisk[], expr: string): NodeDisk[] {
  let steps: ReturnType<typeof relaxedPath>;
  try {
    steps = relaxedPath(expr);
  } catch (err) {
    throw usageError(`--sort-by: ${(err as Error).message}`);
  }
  const keyed = items.map((nd) => ({ nd, key: evaluate(nd, steps)[0] }));
  const less = (a: unknown, b: unknown): boolean => {
    if (a === undefined) return true;
    if (b === undefined) return false;
    if (typeof a === 'number' && typeof b === 'number') return a < b;
    if (typeof a === 'string' && typeof b === 'string') return a < b;
    if (typeof a === 'boolean' && typeof b === 'boolean') return !a && b;
    throw usageError(`--sort-by ${expr}: cannot sort by ${typeof a === 'object' ? 'a map or list' : typeof a} values; point it at a string or a number`);
  };
  if (keyed.length <= 12) {
    for (let i = 1; i < keyed.length; i++) {
      for (let j = i; j > 0 && less(keyed[j]!.key, keyed[j - 1]!.key); j--) [keyed[j], keyed[j - 1]] = [keyed[j - 1]!, keyed[j]!];
    }
  } else {
    keyed.sort((a, b) => (less(a.key, b.key) ? -1 : less(b.key, a.key) ? 1 : 0));
  }
  return keyed.map((k) => k.nd);
}
