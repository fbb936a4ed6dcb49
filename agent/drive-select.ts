// Which drives the admin chose (docs/adr/0044-real-drives.md): nothing by default; each `--drive` selector
// is a list of terms that must all hold, and a drive any selector matches is chosen. Terms:
//   by-id=GLOB   one of its /dev/disk/by-id names (`nvme-*`, `wwn-0x5000c500*`)
//   model=GLOB, serial=GLOB
//   media=nvme|ssd|hdd, transport=nvme|sata|sas|scsi|usb|virtio|other
//   min-size=Q, max-size=Q   Kubernetes quantities (`100Gi`)
// A chosen drive that must not be taken (./drive-scan.ts) is still chosen, with its refusals: it is shown
// with why, never silently left out. A by-id name that matches a selector but points at a partition is
// reported as such: a partition is never a drive.
import { matchesGlob } from 'node:path';
import { quantityBytes } from '../api/quantity.ts';
import type { Drive, Media, Transport } from './drive-scan.ts';

const MEDIA: readonly Media[] = ['nvme', 'ssd', 'hdd'];
const TRANSPORTS: readonly Transport[] = ['nvme', 'sata', 'sas', 'scsi', 'usb', 'virtio', 'other'];

export interface DriveSelector {
  /** As the admin wrote it, for messages. */
  text: string;
  byId?: string;
  model?: string;
  serial?: string;
  media?: Media;
  transport?: Transport;
  minBytes?: number;
  maxBytes?: number;
}

/** Parses one `--drive` value; a bad one is an error naming the term and what it takes. */
export function parseDriveSelector(value: string): DriveSelector {
  const sel: DriveSelector = { text: value };
  if (value.trim() === '') throw new Error('--drive is empty: give terms such as by-id=nvme-* or media=ssd,min-size=100Gi');
  for (const term of value.split(',')) {
    const eq = term.indexOf('=');
    const key = eq < 0 ? term : term.slice(0, eq);
    const v = eq < 0 ? '' : term.slice(eq + 1);
    if (v === '') throw new Error(`--drive ${JSON.stringify(value)}: term ${JSON.stringify(term)} has no value (key=value)`);
    if (/[\0-\x1f\x7f]/.test(v)) throw new Error(`--drive ${JSON.stringify(value)}: term ${JSON.stringify(key)} contains a control character`);
    switch (key) {
      case 'by-id':
        if (v.includes('/')) throw new Error(`--drive ${JSON.stringify(value)}: by-id takes a name in /dev/disk/by-id (a glob such as nvme-*), not a path`);
        sel.byId = v;
        break;
      case 'model':
        sel.model = v;
        break;
      case 'serial':
        sel.serial = v;
        break;
      case 'media':
        if (!MEDIA.includes(v as Media)) throw new Error(`--drive ${JSON.stringify(value)}: media is one of ${MEDIA.join(', ')}, not ${JSON.stringify(v)}`);
        sel.media = v as Media;
        break;
      case 'transport':
        if (!TRANSPORTS.includes(v as Transport)) throw new Error(`--drive ${JSON.stringify(value)}: transport is one of ${TRANSPORTS.join(', ')}, not ${JSON.stringify(v)}`);
        sel.transport = v as Transport;
        break;
      case 'min-size':
      case 'max-size': {
        const bytes = quantityBytes(v);
        if (bytes === undefined) throw new Error(`--drive ${JSON.stringify(value)}: ${key} takes a quantity such as 100Gi, not ${JSON.stringify(v)}`);
        if (key === 'min-size') sel.minBytes = bytes;
        else sel.maxBytes = bytes;
        break;
      }
      default:
        throw new Error(`--drive ${JSON.stringify(value)}: unknown term ${JSON.stringify(key)} (by-id, model, serial, media, transport, min-size, max-size)`);
    }
  }
  return sel;
}

/** Whether one selector takes the drive. */
export function matches(sel: DriveSelector, d: Drive): boolean {
  if (sel.byId !== undefined && !d.byId.some((name) => matchesGlob(name, sel.byId!))) return false;
  if (sel.model !== undefined && !matchesGlob(d.model, sel.model)) return false;
  if (sel.serial !== undefined && !matchesGlob(d.serial, sel.serial)) return false;
  if (sel.media !== undefined && d.media !== sel.media) return false;
  if (sel.transport !== undefined && d.transport !== sel.transport) return false;
  if (sel.minBytes !== undefined && d.sizeBytes < sel.minBytes) return false;
  if (sel.maxBytes !== undefined && d.sizeBytes > sel.maxBytes) return false;
  return true;
}

export interface Selection {
  /** The drives some selector takes, refusals and all. */
  chosen: Drive[];
  /** "by-id name X (selector S) points at partition sda1, not a whole drive". */
  notDrives: string[];
}

/**
 * The drives the selectors take. `links` are the by-id names by the kernel name they point at (partitions
 * included), so a name that matches a by-id term but is a partition's is told, not ignored.
 */
export function selectDrives(drives: Drive[], selectors: DriveSelector[], links: ReadonlyMap<string, string[]>): Selection {
  const chosen = drives.filter((d) => selectors.some((s) => matches(s, d)));
  const whole = new Set(drives.map((d) => d.kernelName));
  const notDrives: string[] = [];
  for (const s of selectors) {
    if (s.byId === undefined) continue;
    for (const [target, names] of links) {
      if (whole.has(target)) continue;
      for (const name of names.filter((n) => matchesGlob(n, s.byId!)).sort())
        notDrives.push(`by-id name ${name} (--drive ${s.text}) points at ${target}, which is not a whole drive (a partition, or a device that is never one): not taken`);
    }
  }
  return { chosen, notDrives };
}
