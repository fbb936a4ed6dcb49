// The CSI driver on the local cluster installed with kustomize (kustomize/overlays/local-cluster): ./_csi-suite.ts.
import { csiSuite } from './_csi-suite.ts';

await csiSuite('kustomize');
