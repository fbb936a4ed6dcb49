// prom-client declares only its index; its class files (lib/runtime/prom-client.ts imports them directly)
// export what the index re-exports.
declare module 'prom-client/lib/counter.js' {
  const Counter: unknown;
  export default Counter;
}
declare module 'prom-client/lib/gauge.js' {
  const Gauge: unknown;
  export default Gauge;
}
declare module 'prom-client/lib/histogram.js' {
  const Histogram: unknown;
  export default Histogram;
}
declare module 'prom-client/lib/registry.js' {
  const Registry: unknown;
  export default Registry;
}
