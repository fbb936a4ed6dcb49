// How the agent asks the node side to wipe a drive, and how the answer comes back (docs/adr/0044-real-drives.md).
// The agent has no device access; the CSI driver's node side, in the same pod, is privileged. They share the
// disk dir, so the request and its answer are two small files there, beside the drive's marker:
//   drive-<identity>.wipe    the agent's request: the wipe token, the by-id name, the device number it saw
//   drive-<identity>.wiped   the node side's answer for that token: done (how many bytes, how long) or why not
//   drive-<identity>.wiping  the node side's progress on that token while it zeroes step by step: how far it
//                            got, for the agent's status, and where a restarted node side resumes
// The node side wipes only the whole block device the by-id name leads to, only if its device number is the
// one the agent saw, and only if the kernel lets it open the device exclusively (nothing mounted from it,
// no holder). The agent reports the token done (status.node.wipedFor) only from an answer naming it.
import { WIPE_TOKEN_PATTERN } from './constants.ts';

export const WIPE_REQUEST_SUFFIX = '.wipe';
export const WIPE_ANSWER_SUFFIX = '.wiped';
export const WIPE_PROGRESS_SUFFIX = '.wiping';

export interface DriveWipeRequest {
  token: string;
  /** The drive's name in the by-id dir, as the agent found it. */
  byIdName: string;
  /** `major:minor` of the device that name led to when the agent asked. */
  device: string;
}

export type DriveWipeAnswer = { token: string; ok: true; bytes: number; ms: number; method: string } | { token: string; ok: false; message: string };

const BY_ID_NAME = /^[A-Za-z0-9][A-Za-z0-9._:+-]*$/;
const tokenRe = new RegExp(WIPE_TOKEN_PATTERN);

export function wipeRequestName(diskID: string): string {
  return `${diskID}${WIPE_REQUEST_SUFFIX}`;
}

export function wipeAnswerName(diskID: string): string {
  return `${diskID}${WIPE_ANSWER_SUFFIX}`;
}

export function wipeProgressName(diskID: string): string {
  return `${diskID}${WIPE_PROGRESS_SUFFIX}`;
}

export interface DriveWipeProgress {
  token: string;
  /** `major:minor` of the device being wiped: a resume is only ever on the same device. */
  device: string;
  /** Bytes from the start of the device known zeroed. */
  doneBytes: number;
  totalBytes: number;
}

export function formatWipeProgress(p: DriveWipeProgress): string {
  return `${JSON.stringify({ token: p.token, device: p.device, doneBytes: p.doneBytes, totalBytes: p.totalBytes })}\n`;
}

/** Progress as written, or undefined for anything else (no resume, no progress shown: the wipe starts over). */
export function parseWipeProgress(text: string): DriveWipeProgress | undefined {
  try {
    const v = JSON.parse(text) as Partial<DriveWipeProgress>;
    if (typeof v.token !== 'string' || !tokenRe.test(v.token) || typeof v.device !== 'string' || !/^\d+:\d+$/.test(v.device)) return undefined;
    if (!Number.isSafeInteger(v.doneBytes) || !Number.isSafeInteger(v.totalBytes)) return undefined;
    const doneBytes = v.doneBytes as number;
    const totalBytes = v.totalBytes as number;
    if (doneBytes < 0 || totalBytes <= 0 || doneBytes > totalBytes) return undefined;
    return { token: v.token, device: v.device, doneBytes, totalBytes };
  } catch {
    return undefined;
  }
}

export function formatWipeRequest(r: DriveWipeRequest): string {
  return `${JSON.stringify({ token: r.token, byIdName: r.byIdName, device: r.device })}\n`;
}

/** A request as written, or why it is not one (the node side wipes nothing on a request it cannot read). */
export function parseWipeRequest(text: string): DriveWipeRequest | string {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return 'not JSON';
  }
  const r = v as Partial<DriveWipeRequest>;
  if (typeof r.token !== 'string' || !tokenRe.test(r.token)) return 'no valid token';
  if (typeof r.byIdName !== 'string' || !BY_ID_NAME.test(r.byIdName)) return 'no valid by-id name';
  if (typeof r.device !== 'string' || !/^\d+:\d+$/.test(r.device)) return 'no valid device number';
  return { token: r.token, byIdName: r.byIdName, device: r.device };
}

export function formatWipeAnswer(a: DriveWipeAnswer): string {
  return `${JSON.stringify(a)}\n`;
}

export function parseWipeAnswer(text: string): DriveWipeAnswer | undefined {
  try {
    const v = JSON.parse(text) as Partial<DriveWipeAnswer> & { message?: unknown; bytes?: unknown; ms?: unknown; method?: unknown };
    if (typeof v.token !== 'string') return undefined;
    if (v.ok === true && typeof v.bytes === 'number' && typeof v.ms === 'number' && typeof v.method === 'string') return { token: v.token, ok: true, bytes: v.bytes, ms: v.ms, method: v.method };
    if (v.ok === false && typeof v.message === 'string') return { token: v.token, ok: false, message: v.message.replace(/[^\x20-\x7e]/g, '?').slice(0, 1024) };
    return undefined;
  } catch {
    return undefined;
  }
}
