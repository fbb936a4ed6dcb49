import { fileURLToPath } from 'node:url';

/** The repository root, with no trailing slash. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');
