// The CSI driver on the local cluster installed with the Helm chart (charts/node-disks-manager): ./_csi-suite.ts.
import { csiSuite } from './_csi-suite.ts';

await csiSuite('helm');
