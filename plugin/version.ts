import pkg from '../package.json' with { type: 'json' };
import { API_VERSION } from '../api/constants.ts';

export const VERSION = `v${pkg.version}`;
export const versionLine = () => `kubectl-nodedisks ${VERSION} (API ${API_VERSION}, Node.js ${process.versions.node})`;
