// The memory limit a process runs under (its container's), from the cgroup it is in: cgroup v2
// memory.max or cgroup v1 memory.limit_in_bytes, the smallest along the path up to the root (a parent's
// limit binds its children). Used at start to check that the V8 heap was sized to fit (docs/adr/0023).
import { readFileSync } from 'node:fs';
import { getHeapStatistics } from 'node:v8';

/** v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages); anything above 2^60 is none. */
const UNLIMITED = 2 ** 60;

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
};

/** The directories from `path` up to the root of one cgroup hierarchy mounted at `mount`. */
function upward(mount: string, path: string): string[] {
  const parts = path.split('/').filter(Boolean);
  return Array.from({ length: parts.length + 1 }, (_, i) => `${mount}/${parts.slice(0, parts.length - i).join('/')}`.replace(/\/$/, ''));
}

/**
 * The memory limit in bytes, or undefined when there is none. `root` is where /proc and /sys are
 * (tests give a directory laid out like them).
 */
export function cgroupMemoryLimit(root = ''): number | undefined {
  const self = read(`${root}/proc/self/cgroup`);
  if (self === undefined) return undefined;
  const limits: number[] = [];
  for (const line of self.split('\n')) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    if (path === undefined) continue;
    if (controllers === '') {
      // cgroup v2 (unified): memory.max is "max" or a number of bytes.
      for (const dir of upward(`${root}/sys/fs/cgroup`, path)) {
        const v = read(`${dir}/memory.max`);
        if (v !== undefined && v !== 'max') limits.push(Number(v));
      }
    } else if (controllers!.split(',').includes('memory')) {
      for (const dir of upward(`${root}/sys/fs/cgroup/memory`, path)) {
        const v = read(`${dir}/memory.limit_in_bytes`);
        if (v !== undefined) limits.push(Number(v));
      }
    }
  }
  const limit = Math.min(...limits.filter((n) => Number.isFinite(n) && n > 0));
  return Number.isFinite(limit) && limit < UNLIMITED ? limit : undefined;
}

/**
 * Why the V8 heap does not fit the memory limit, if it does not: the heap may grow to more than
 * `maxShare` of the limit, leaving too little for everything else of the process (code, buffers, the
 * young generation's copies), so the kernel would kill it before V8 collects.
 */
export function heapProblem(limitBytes: number | undefined, maxShare = 0.75, heapLimitBytes = getHeapStatistics().heap_size_limit): string | undefined {
  if (limitBytes === undefined || heapLimitBytes <= limitBytes * maxShare) return undefined;
  const mib = (n: number) => `${Math.round(n / 2 ** 20)} MiB`;
  return `the V8 heap may grow to ${mib(heapLimitBytes)} under a memory limit of ${mib(limitBytes)}: the process would be killed for memory before V8 collects; start node with --max-old-space-size-percentage=50 (the image does) or --max-old-space-size=${Math.floor((limitBytes * 0.5) / 2 ** 20)}`;
}
