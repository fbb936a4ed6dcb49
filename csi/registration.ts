// Registration with the kubelet's plugin watcher, without node-driver-registrar: the kubelet finds a socket
// in its plugins_registry dir, asks it what it is (GetInfo: a CSI plugin, its name, the socket of its Node
// service, the CSI versions it speaks) and says whether it took it (NotifyRegistrationStatus). The kubelet
// then calls NodeGetInfo and writes the CSINode object with our node ID and topology.
import { join } from 'node:path';
import { CSI_DRIVER } from '../api/constants.ts';
import type { Logger } from '../lib/runtime/log.ts';
import type { ServedService } from './server.ts';
import { registrationService } from './proto/load.ts';

/** The socket the kubelet's plugin watcher finds in `registrationDir`. */
export function registrationSocket(registrationDir: string): string {
  return join(registrationDir, `${CSI_DRIVER}-reg.sock`);
}

export class Registration {
  /** undefined until the kubelet has answered; then its error, or '' when it registered the driver. */
  private status: string | undefined;
  private readonly endpoint: string;
  private readonly log: Logger;

  constructor(o: { endpoint: string; log: Logger }) {
    this.endpoint = o.endpoint;
    this.log = o.log;
  }

  /** Why the driver is not registered with the kubelet, or undefined once it is. */
  problem(): string | undefined {
    if (this.status === undefined) return 'not registered with the kubelet yet';
    return this.status === '' ? undefined : `the kubelet refused the registration: ${this.status}`;
  }

  service(): ServedService {
    return {
      definition: registrationService,
      handlers: {
        GetInfo: async () => ({ type: 'CSIPlugin', name: CSI_DRIVER, endpoint: this.endpoint, supported_versions: ['1.0.0'] }),
        NotifyRegistrationStatus: async (req: { plugin_registered: boolean; error: string }) => {
          this.status = req.plugin_registered ? '' : req.error || 'no reason given';
          if (req.plugin_registered) this.log.info('registered with the kubelet', { driver: CSI_DRIVER, endpoint: this.endpoint });
          else this.log.error('the kubelet refused the registration', { driver: CSI_DRIVER, error: this.status });
          return {};
        },
      },
    };
  }
}
