// prom-client's classes, from their own files rather than its index: the index also evaluates its cluster
// aggregator (node:cluster, which loads child_process and dgram), the Pushgateway (http, https, zlib) and
// the default metrics (perf_hooks), none of which the daemons use, and each builtin a process loads stays
// resident in it (its source and code pages; docs/adr/0026-metrics-on-prom-client.md). Types come from
// the package's own declarations.
import type * as Prom from 'prom-client';
import CounterClass from 'prom-client/lib/counter.js';
import GaugeClass from 'prom-client/lib/gauge.js';
import HistogramClass from 'prom-client/lib/histogram.js';
import RegistryClass from 'prom-client/lib/registry.js';

export const Counter = CounterClass as unknown as typeof Prom.Counter;
export type Counter<T extends string = string> = Prom.Counter<T>;
export const Gauge = GaugeClass as unknown as typeof Prom.Gauge;
export type Gauge<T extends string = string> = Prom.Gauge<T>;
export const Histogram = HistogramClass as unknown as typeof Prom.Histogram;
export type Histogram<T extends string = string> = Prom.Histogram<T>;
export const Registry = RegistryClass as unknown as typeof Prom.Registry;
export type Registry = Prom.Registry;
