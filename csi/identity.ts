// The CSI Identity service, the same on both sides of the driver: its name, what the plugin as a whole
// offers (a controller service; volumes that are reachable from one node only), and whether it is ready.
import { CSI_DRIVER } from '../api/constants.ts';

export function identityHandlers(o: { version: string; notReady: () => string | undefined }) {
  return {
    GetPluginInfo: async () => ({ name: CSI_DRIVER, vendor_version: o.version, manifest: {} }),
    GetPluginCapabilities: async () => ({
      capabilities: [{ service: { type: 'CONTROLLER_SERVICE' } }, { service: { type: 'VOLUME_ACCESSIBILITY_CONSTRAINTS' } }],
    }),
    Probe: async () => ({ ready: { value: o.notReady() === undefined } }),
  };
}
