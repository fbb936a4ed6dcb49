// The process and Node.js runtime metrics, under the names and meanings prom-client's default metrics
// and client_golang's process collector use (dashboards and our benches read them). Everything is read
// when scraped: no timers, no event-loop or GC histograms running between scrapes (docs/adr/0026).
import { readdirSync, readFileSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';
import type { Collector, MetricFamily, Registry } from './metrics.ts';

const gauge = (name: string, help: string, value: number, labels: [string, string][] = []): MetricFamily => ({ name, help, type: 'gauge', samples: [{ name, labels, value }] });
const counter = (name: string, help: string, value: number): MetricFamily => ({ name, help, type: 'counter', samples: [{ name, labels: [], value }] });

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
};

/**
 * The families, read now. `proc` is the process's /proc directory (tests give another); where it is
 * missing (not Linux) the fd and virtual memory metrics are left out rather than reported as 0.
 */
export function processFamilies(proc = '/proc/self'): MetricFamily[] {
  const cpu = process.cpuUsage();
  const mem = process.memoryUsage();
  const families = [
    counter('process_cpu_user_seconds_total', 'Total user CPU time spent in seconds.', cpu.user / 1e6),
    counter('process_cpu_system_seconds_total', 'Total system CPU time spent in seconds.', cpu.system / 1e6),
    counter('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', (cpu.user + cpu.system) / 1e6),
    gauge('process_start_time_seconds', 'Start time of the process since unix epoch in seconds.', START_TIME_SECONDS),
    gauge('process_resident_memory_bytes', 'Resident memory size in bytes.', mem.rss),
  ];
  // /proc/self/stat: "pid (comm) state ...", comm may hold spaces and parentheses: fields count from the
  // last ")". vsize is field 23 of the line, the 21st after the ")".
  const stat = read(`${proc}/stat`);
  const vsize = stat === undefined ? undefined : Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[20]);
  if (vsize !== undefined && Number.isFinite(vsize)) families.push(gauge('process_virtual_memory_bytes', 'Virtual memory size in bytes.', vsize));
  const fds = openFds(proc);
  if (fds !== undefined) families.push(gauge('process_open_fds', 'Number of open file descriptors.', fds));
  const maxFds = /^Max open files\s+(\d+)/m.exec(read(`${proc}/limits`) ?? '')?.[1];
  if (maxFds !== undefined) families.push(gauge('process_max_fds', 'Maximum number of open file descriptors.', Number(maxFds)));
  families.push(
    gauge('nodejs_heap_size_total_bytes', 'Process heap size from Node.js in bytes.', mem.heapTotal),
    gauge('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes.', mem.heapUsed),
    gauge('nodejs_external_memory_bytes', 'Node.js external memory size in bytes.', mem.external),
  );
  const spaces = getHeapSpaceStatistics();
  // "new_space" is exposed as space="new", as prom-client does.
  const space = (field: 'space_size' | 'space_used_size' | 'space_available_size', what: string, help: string): MetricFamily => ({
    name: `nodejs_heap_space_size_${what}_bytes`,
    help,
    type: 'gauge',
    samples: spaces.map((s) => ({ name: `nodejs_heap_space_size_${what}_bytes`, labels: [['space', s.space_name.replace(/_space$/, '')]], value: s[field] })),
  });
  families.push(
    space('space_size', 'total', 'Process heap space size total from Node.js in bytes.'),
    space('space_used_size', 'used', 'Process heap space size used from Node.js in bytes.'),
    space('space_available_size', 'available', 'Process heap space size available from Node.js in bytes.'),
  );
  // What keeps the event loop alive (timers, sockets, file handles), by type: a leak shows here.
  const resources = new Map<string, number>();
  for (const type of process.getActiveResourcesInfo()) resources.set(type, (resources.get(type) ?? 0) + 1);
  // (prom-client also has their sum as nodejs_active_resources_total, a gauge named like a counter, which
  // promlint rejects: sum(nodejs_active_resources) is the same.)
  families.push({
    name: 'nodejs_active_resources',
    help: 'Number of active resources that are currently keeping the event loop alive, grouped by async resource type.',
    type: 'gauge',
    samples: [...resources].map(([type, n]) => ({ name: 'nodejs_active_resources', labels: [['type', type]], value: n })),
  });
  const [major = '', minor = '', patch = ''] = process.versions.node.split('.');
  families.push(
    gauge('nodejs_version_info', 'Node.js version info.', 1, [
      ['version', process.version],
      ['major', major],
      ['minor', minor],
      ['patch', patch],
    ]),
  );
  return families;
}

/** When the process started: now less its uptime, taken once so that every scrape gives the same value. */
const START_TIME_SECONDS = Math.round(Date.now() / 1000 - process.uptime());

/** Entries of /proc/self/fd, less the one readdir itself held open while listing. */
function openFds(proc: string): number | undefined {
  try {
    return readdirSync(`${proc}/fd`).length - 1;
  } catch {
    return undefined;
  }
}

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

/** Registers the process and runtime metrics (what prom-client's collectDefaultMetrics did for us). */
export function registerProcessMetrics(registry: Registry, proc = '/proc/self'): void {
  const c: Collector = { names: PROCESS_METRIC_NAMES, collect: () => processFamilies(proc) };
  registry.register(c);
}
