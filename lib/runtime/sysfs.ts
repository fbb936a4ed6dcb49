// What the kernel shows of block devices in sysfs, read the same way by the agent (a disk's health) and by
// the CSI node side (a volume's condition): by device number, never by a path a shared kernel makes ambiguous.
import * as fsp from 'node:fs/promises';

/** A small sysfs value, trimmed; undefined when it is not there or cannot be read. */
export async function readSysfsValue(path: string): Promise<string | undefined> {
  try {
    return (await fsp.readFile(path, 'utf8')).trim();
  } catch {
    return undefined;
  }
}

/** The kernel's name of a block device (`loop3`, `nvme0n1`) from its number, `major:minor`; undefined when sysfs has none. */
export async function blockDeviceName(sysRoot: string, deviceNumber: string): Promise<string | undefined> {
  if (!/^\d+:\d+$/.test(deviceNumber)) return undefined;
  try {
    return (await fsp.readlink(`${sysRoot}/dev/block/${deviceNumber}`)).split('/').at(-1);
  } catch {
    return undefined;
  }
}

/** The errors ext4 has recorded on the device `name` since its last check (0 when none, or not mounted ext4). */
export async function ext4ErrorCount(sysRoot: string, name: string): Promise<number> {
  const n = Number(await readSysfsValue(`${sysRoot}/fs/ext4/${name}/errors_count`));
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}
