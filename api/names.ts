// Naming rules: the NodeDisk object name, label values, and what makes a file name a valid diskID.
// The API server enforces the same diskID and nodeName rules through the CRD schema (./v1alpha1/schema.ts);
// these functions let the agent and the plugin reject bad input before a round trip, with a reason.

import { posix } from 'node:path';
import { DISK_SUFFIX, DRIVE_ID_PREFIX, MAX_DISK_ID_LENGTH, MAX_LABEL_VALUE_LENGTH, MAX_NAME_LENGTH } from './constants.ts';

/** A Kubernetes DNS subdomain (RFC 1123), as node names are. */
export const DNS_SUBDOMAIN_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
/** A diskID: the file name without `.img`. No `/`, no leading dot, no `..` (checked separately). */
export const DISK_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]*$';

const dnsSubdomain = new RegExp(DNS_SUBDOMAIN_PATTERN);
const diskIdRe = new RegExp(DISK_ID_PATTERN);
const labelValueRe = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Hex digits of the hash that ends a shortened name, and how much of the full name comes before it. */
export const HASH_LENGTH = 10;
export const HASHED_HEAD_LENGTH = MAX_NAME_LENGTH - HASH_LENGTH - 1;

/** Short, stable hash of the raw identity: what keeps truncated names unique. */
function shortHash(...parts: string[]): string {
  // NUL cannot occur in a node name or a file name, so the joined input is unambiguous. node:crypto is
  // loaded only here, when a name is too long: importing it costs every plugin start a few milliseconds.
  return process.getBuiltinModule('node:crypto').createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, HASH_LENGTH);
}

/** The seed's normalization: lowercase, `_` and `.` and anything else outside [a-z0-9-] become `-`. */
export function normalizeNamePart(input: string): string {
  let v = input.toLowerCase().replace(/[^a-z0-9-]/g, '-');
  v = v.replace(/-{2,}/g, '-').replace(/^-+|-+$/g, '');
  return v === '' ? 'unknown' : v;
}

/**
 * `node-disk-<node>-<disk>`, normalized as in the seed, so the seed's names are unchanged.
 * The seed cut names at 253 characters, so two long names could collide; here a name that would be
 * longer is cut shorter and ends in a hash of the raw node name and diskID, which keeps it unique and valid.
 */
export function nodeDiskName(nodeName: string, diskID: string): string {
  const full = `node-disk-${normalizeNamePart(nodeName)}-${normalizeNamePart(diskID)}`;
  if (full.length <= MAX_NAME_LENGTH) return full;
  const suffix = `-${shortHash(nodeName, diskID)}`;
  const head = full.slice(0, HASHED_HEAD_LENGTH).replace(/-+$/, '');
  return head + suffix;
}

/**
 * A label value for a node name or diskID. Most are valid as they are and are kept verbatim so
 * `-l localtest.example.com/node=<node>` works; a longer one (node names may have 253 characters,
 * label values 63) is cut and given a hash suffix so it stays unique.
 */
export function labelValue(raw: string): string {
  if (raw.length <= MAX_LABEL_VALUE_LENGTH && labelValueRe.test(raw)) return raw;
  const suffix = `-${shortHash(raw)}`;
  const head = normalizeNamePart(raw)
    .slice(0, MAX_LABEL_VALUE_LENGTH - suffix.length)
    .replace(/-+$/, '');
  return head + suffix;
}

/** Why a string is not a valid node name, or undefined when it is. */
export function nodeNameProblem(nodeName: string): string | undefined {
  if (nodeName === '') return 'node name is empty';
  if (nodeName.length > MAX_NAME_LENGTH) return `node name is longer than ${MAX_NAME_LENGTH} characters`;
  if (!dnsSubdomain.test(nodeName)) {
    return `node name ${JSON.stringify(nodeName)} is not a DNS subdomain (lowercase letters, digits, '-' and '.')`;
  }
  return undefined;
}

/** Why a string is not a valid diskID, or undefined when it is. */
export function diskIdProblem(diskID: string): string | undefined {
  if (diskID === '') return 'diskID is empty';
  if (diskID.length > MAX_DISK_ID_LENGTH) return `diskID is longer than ${MAX_DISK_ID_LENGTH} characters`;
  if (diskID.includes('/')) return `diskID ${JSON.stringify(diskID)} contains '/'`;
  if (diskID.includes('..')) return `diskID ${JSON.stringify(diskID)} contains '..'`;
  if (!diskIdRe.test(diskID)) {
    return `diskID ${JSON.stringify(diskID)} must start with a letter or digit and contain only letters, digits, '.', '_' and '-'`;
  }
  return undefined;
}

/** The diskID of a disk image file name (`disk1.img` → `disk1`), or undefined when it is not a disk image name. */
export function diskIdFromFileName(fileName: string): string | undefined {
  if (!fileName.endsWith(DISK_SUFFIX) || fileName.length === DISK_SUFFIX.length) return undefined;
  return fileName.slice(0, -DISK_SUFFIX.length);
}

/** Host path of a disk's image file, as stored in `spec.path`. */
export function diskPath(diskDir: string, diskID: string): string {
  return posix.join(diskDir, `${diskID}${DISK_SUFFIX}`);
}

/** Whether a diskID names a drive (`drive-<identity>`), not a disk image. */
export function isDriveId(diskID: string): boolean {
  return diskID.startsWith(DRIVE_ID_PREFIX);
}
