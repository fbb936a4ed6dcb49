// The plugin's entry in the bundle: turn on Node's compile cache before the (larger) main chunk is
// loaded, so the second and later runs skip compiling it (docs/benchmarks.md).
import { enableCompileCache } from 'node:module';

enableCompileCache?.();
await import('./main.ts');
