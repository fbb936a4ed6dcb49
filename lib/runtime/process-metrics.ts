// The process and Node.js runtime metrics, under the names and meanings prom-client's default metrics
// and client_golang's process collector use (dashboards and our benches read them), defined as
// prom-client metrics whose collect hooks read the values when scraped. Not collectDefaultMetrics:
// that keeps an event-loop delay histogram and a GC observer running between scrapes, and exposes
// nodejs_active_resources_total, a gauge named like a counter that promlint rejects (docs/adr/0026).
import { readdirSync, readFileSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';
import { Counter, Gauge, type Registry } from './prom-client.ts';

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
};

/** /proc/self/stat: "pid (comm) state ...", comm may hold spaces and parentheses: fields count from the last ")". vsize is the 21st after it. */
const vsizeOf = (stat: string | undefined): number | undefined => {
  const vsize = stat === undefined ? undefined : Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[20]);
  return vsize !== undefined && Number.isFinite(vsize) ? vsize : undefined;
};

/** Entries of /proc/self/fd, less the one readdir itself held open while listing. */
const openFds = (proc: string): number | undefined => {
  try {
    return readdirSync(`${proc}/fd`).length - 1;
  } catch {
    return undefined;
  }
};

export const PROCESS_METRIC_NAMES: readonly string[] = [
  'process_cpu_user_seconds_total',
  'process_cpu_system_seconds_total',
  'process_cpu_seconds_total',
  'process_start_time_seconds',
  'process_resident_memory_bytes',
  'process_virtual_memory_bytes',
  'process_open_fds',
  'process_max_fds',
  'nodejs_heap_size_total_bytes',
  'nodejs_heap_size_used_bytes',
  'nodejs_external_memory_bytes',
  'nodejs_heap_space_size_total_bytes',
  'nodejs_heap_space_size_used_bytes',
  'nodejs_heap_space_size_available_bytes',
  'nodejs_active_resources',
  'nodejs_version_info',
];

/**
 * Registers the process and runtime metrics. `proc` is the process's /proc directory (tests give
 * another); where a file of it is missing (not Linux) its metric is left out rather than reported as 0.
 */
export function registerProcessMetrics(registry: Registry, proc = '/proc/self'): void {
  const registers = [registry];
  // The registry runs collect hooks in registration order, synchronously: the first one reads the
  // process's CPU and memory once for every metric of this scrape.
  let cpu = process.cpuUsage();
  let mem = process.memoryUsage();
  // A prom-client counter only adds: each scrape sets it to the process's total by starting it again.
  const total = (name: string, help: string, value: () => number, first = false) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        if (first) {
          cpu = process.cpuUsage();
          mem = process.memoryUsage();
        }
        this.reset();
        this.inc(value());
      },
    });
  const gauge = (name: string, help: string, value: () => number | undefined) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const v = value();
        if (v !== undefined) this.set(v);
      },
    });
  total('process_cpu_user_seconds_total', 'Total user CPU time spent in seconds.', () => cpu.user / 1e6, true);
  total('process_cpu_system_seconds_total', 'Total system CPU time spent in seconds.', () => cpu.system / 1e6);
  total('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', () => (cpu.user + cpu.system) / 1e6);
  // Now less the uptime, taken once so that every scrape gives the same value.
  const start = Math.round(Date.now() / 1000 - process.uptime());
  gauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.', () => start);
  gauge('process_resident_memory_bytes', 'Resident memory size in bytes.', () => mem.rss);
  if (vsizeOf(read(`${proc}/stat`)) !== undefined) gauge('process_virtual_memory_bytes', 'Virtual memory size in bytes.', () => vsizeOf(read(`${proc}/stat`)));
  if (openFds(proc) !== undefined) gauge('process_open_fds', 'Number of open file descriptors.', () => openFds(proc));
  const maxFds = /^Max open files\s+(\d+)/m.exec(read(`${proc}/limits`) ?? '')?.[1];
  if (maxFds !== undefined) gauge('process_max_fds', 'Maximum number of open file descriptors.', () => Number(maxFds));
  gauge('nodejs_heap_size_total_bytes', 'Process heap size from Node.js in bytes.', () => mem.heapTotal);
  gauge('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes.', () => mem.heapUsed);
  gauge('nodejs_external_memory_bytes', 'Node.js external memory size in bytes.', () => mem.external);
  // "new_space" is exposed as space="new", as prom-client does; the first of the three reads them for all.
  let spaces = getHeapSpaceStatistics();
  const space = (field: 'space_size' | 'space_used_size' | 'space_available_size', what: string, help: string) =>
    new Gauge({
      name: `nodejs_heap_space_size_${what}_bytes`,
      help,
      labelNames: ['space'],
      registers,
      collect() {
        if (field === 'space_size') spaces = getHeapSpaceStatistics();
        for (const s of spaces) this.set({ space: s.space_name.replace(/_space$/, '') }, s[field]);
      },
    });
  space('space_size', 'total', 'Process heap space size total from Node.js in bytes.');
  space('space_used_size', 'used', 'Process heap space size used from Node.js in bytes.');
  space('space_available_size', 'available', 'Process heap space size available from Node.js in bytes.');
  // What keeps the event loop alive (timers, sockets, file handles), by type: a leak shows here. Only the
  // types there are now: one that is gone is not left at its last count.
  new Gauge({
    name: 'nodejs_active_resources',
    help: 'Number of active resources that are currently keeping the event loop alive, grouped by async resource type.',
    labelNames: ['type'],
    registers,
    collect() {
      const resources = new Map<string, number>();
      for (const type of process.getActiveResourcesInfo()) resources.set(type, (resources.get(type) ?? 0) + 1);
      this.reset();
      for (const [type, n] of resources) this.set({ type }, n);
    },
  });
  const [major = '', minor = '', patch = ''] = process.versions.node.split('.');
  new Gauge({ name: 'nodejs_version_info', help: 'Node.js version info.', labelNames: ['version', 'major', 'minor', 'patch'], registers }).set(
    { version: process.version, major, minor, patch },
    1,
  );
}
