// kubectl nodedisks claim NAME [-n NS] [--node N] [--min-capacity Q] [-l SELECTOR] [--disk D]
// [--reclaim-policy Delete|Retain] [--wait [--timeout 60s]] [-o name|yaml|json] [--dry-run=client|server]:
// creates a NodeDiskClaim (quiet as kubectl create: one "nodediskclaim.localtest.example.com/NAME created"
// line) and, with --wait, waits until the controller bound it and the disk's marker is on the node, then
// prints the node and the disk image's path. What the claim says (../claim-model.ts) is pure; here, the requests.
import type { CommandSpec } from '../args.ts';
import { FIELD_MANAGER } from '../../api/constants.ts';
import type { NodeDiskClaim } from '../../api/v1alpha1/claim-types.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import { Backoff, sleep } from '../../lib/runtime/backoff.ts';
import { boundLine, claimFromFlags, claimReason, claimRef, claimUsable, type ClaimSpecFlags } from '../claim-model.ts';
import { durationFlag, type Session } from '../context.ts';
import { EXIT, PluginError, usageError } from '../errors.ts';
import { escapeControl } from '../escape.ts';
import { goJson, sortKeys } from '../kubectl/goformat.ts';
import { YAML_OPTIONS } from '../kubectl/printers.ts';
import { DRY_RUN_FLAG, dryRunMode } from './flags.ts';

export interface ClaimArgs extends ClaimSpecFlags {
  name?: string | undefined;
  namespace?: string | undefined;
  wait?: boolean | undefined;
  timeout?: string | undefined;
  output?: string | undefined;
  'dry-run'?: string | true | undefined;
  'field-manager'?: string | undefined;
}

/** -n/--namespace, as every namespaced command takes it. */
export const NAMESPACE_FLAG = { type: 'string', short: 'n', describe: "The namespace of the claim; by default the kubeconfig context's namespace (default when it names none)" } as const;

/** kubectl hides managedFields unless --show-managed-fields. */
function withoutManagedFields(c: NodeDiskClaim): NodeDiskClaim {
  const { managedFields: _, ...metadata } = c.metadata;
  return { ...c, metadata };
}

/** One claim, or a List of them, as kubectl prints -o json|yaml. */
export async function printClaims(items: NodeDiskClaim[], format: 'json' | 'yaml', single: boolean, out: (t: string) => void): Promise<void> {
  const clean = items.map(withoutManagedFields);
  const doc = single && clean.length === 1 ? clean[0] : { apiVersion: 'v1', items: clean, kind: 'List', metadata: { resourceVersion: '' } };
  if (format === 'json') out(goJson(doc, '    ') + '\n');
  else out((await import('js-yaml')).dump(sortKeys(doc), YAML_OPTIONS));
}

/**
 * Watches one claim until `usable`, or the deadline; answers the claim as last seen. A watch that ends is
 * resumed from a fresh read after a growing pause (never a tight loop against the API server).
 */
async function waitUsable(session: Session, created: NodeDiskClaim, timeoutMs: number): Promise<{ claim: NodeDiskClaim; met: boolean }> {
  const claims = session.claims();
  const ns = created.metadata.namespace ?? '';
  const name = created.metadata.name ?? '';
  let last = created;
  if (claimUsable(last)) return { claim: last, met: true };
  const deadline = Date.now() + timeoutMs;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  const backoff = new Backoff({ initialMs: 500, maxMs: 5000 });
  let resourceVersion = created.metadata.resourceVersion;
  try {
    while (Date.now() < deadline) {
      session.io.progress(`waiting for ${claimRef(name)} to bind: ${claimReason(last)}`);
      let events = 0;
      try {
        const opts = { fieldSelector: `metadata.name=${name}`, resourceVersion, allowWatchBookmarks: true, timeoutSeconds: Math.max(1, Math.ceil((deadline - Date.now()) / 1000)) };
        for await (const ev of claims.watch(ns, opts, abort.signal)) {
          if (ev.type === 'ERROR') break; // 410 Gone or another failure: read again below
          events++;
          resourceVersion = ev.object.metadata.resourceVersion ?? resourceVersion;
          if (ev.type === 'BOOKMARK') continue;
          if (ev.type === 'DELETED') throw new PluginError(`${claimRef(name)} was deleted while waiting for it to bind`, EXIT.notFound);
          last = ev.object;
          if (claimUsable(last)) return { claim: last, met: true };
        }
      } catch (err) {
        if (abort.signal.aborted) break;
        throw err;
      }
      if (Date.now() >= deadline) break;
      if (events === 0) await sleep(backoff.next(), abort.signal);
      else backoff.reset();
      if (abort.signal.aborted) break;
      last = await claims.get(ns, name);
      resourceVersion = last.metadata.resourceVersion;
      if (claimUsable(last)) return { claim: last, met: true };
    }
  } finally {
    clearTimeout(timer);
    session.io.progress('');
  }
  // The reason as it stands at the deadline, not as the last event had it.
  last = await claims.get(ns, name).catch(() => last);
  return { claim: last, met: claimUsable(last) };
}

export const claimCommand: CommandSpec<ClaimArgs> = {
  name: 'claim',
  summary: 'Claim a disk for a namespace (a NodeDiskClaim) and, with --wait, wait until it is bound',
  description:
    'Create a NodeDiskClaim: the controller binds it to one free NodeDisk that matches (--node, --min-capacity, -l over NodeDisk labels, --disk), as a PVC binds a PV. ' +
    'Prints "nodediskclaim.localtest.example.com/NAME created", as kubectl create does. With --wait, returns once the claim is Bound and Ready (the marker is on the node) and prints the node and the disk image\'s path; ' +
    'on --timeout it fails with the reason the claim is Pending. A claim reserves a disk with no pod; a pod gets a node-local disk through a PersistentVolumeClaim of StorageClass nodedisks instead (kubectl nodedisks status claim/NAME shows one).',
  positionals: [{ name: 'name', describe: 'The claim name', required: true }],
  flags: {
    namespace: NAMESPACE_FLAG,
    node: { type: 'string', describe: 'Only disks of this node (spec.nodeName)' },
    'min-capacity': { type: 'string', describe: 'Only disks at least this big: a quantity such as 32Mi or 1Gi (spec.minCapacity)' },
    selector: { type: 'string', short: 'l', describe: "Only disks whose labels match this selector, e.g. tier=fast or 'tier in (fast,slow)' (spec.selector)" },
    disk: { type: 'string', describe: 'This NodeDisk and no other (spec.diskName)' },
    'reclaim-policy': { type: 'string', describe: 'Delete (the default: deleting the claim releases the disk) or Retain (the reservation stays for an administrator)' },
    wait: { type: 'boolean', default: false, describe: 'Wait until the claim is Bound and Ready, then print its node and path' },
    timeout: { type: 'string', default: '60s', describe: 'With --wait: give up after this long, with the reason the claim is Pending' },
    output: { type: 'string', short: 'o', describe: 'name, yaml or json: print the claim (as created; with --wait, as bound) instead of the created line' },
    'dry-run': DRY_RUN_FLAG,
    'field-manager': { type: 'string', default: FIELD_MANAGER.plugin, describe: 'Name of the manager used to track field ownership' },
  },
  examples: [
    ['kubectl nodedisks claim db -n team-a --min-capacity 32Mi --wait', 'Claim a disk of at least 32Mi for team-a and wait for it'],
    ['kubectl nodedisks claim cache --node node-a -l tier=fast', 'Claim a fast disk of node-a'],
    ['kubectl nodedisks claim db --dry-run=client -o yaml', 'Print the claim, create nothing'],
  ],
  run: async (session: Session, args: ClaimArgs): Promise<void> => {
    const name = args.name ?? '';
    if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name))
      throw usageError(`invalid claim name ${JSON.stringify(name)}: lower case letters, digits, '-' and '.', starting and ending with a letter or digit`);
    const mode = dryRunMode(args['dry-run'], 'none', 'none, client or server', session.io);
    const output = args.output;
    if (output !== undefined && output !== 'name' && output !== 'yaml' && output !== 'json') throw usageError(`-o/--output for claim is name, yaml or json, got ${JSON.stringify(output)}`);
    const timeoutMs = durationFlag(args.timeout ?? '60s', '--timeout');
    if (args.wait && mode !== 'none') throw usageError('--wait cannot be used with --dry-run: a dry-run claim is never bound');
    if (args.wait && timeoutMs <= 0) throw usageError('--timeout must be positive with --wait');
    // Every flag is checked before the kubeconfig is read; the namespace comes last, from the context.
    const draft = claimFromFlags('', name, args);
    draft.metadata.namespace = session.namespace(args.namespace);
    const print = async (c: NodeDiskClaim, verb: string) => {
      if (output === 'name') session.io.out(`${claimRef(name)}\n`);
      else if (output) await printClaims([c], output, true, session.io.out);
      else session.io.out(`${claimRef(name)} ${verb}\n`);
    };
    if (mode === 'client') return await print(draft, 'created (dry run)');
    let created: NodeDiskClaim;
    try {
      created = await session.claims().create(draft, { fieldManager: args['field-manager'] ?? FIELD_MANAGER.plugin, dryRun: mode === 'server' });
    } catch (err) {
      if (err instanceof ApiError && err.statusCode === 409 && err.reason === 'AlreadyExists') {
        throw new PluginError(
          `${claimRef(name)} already exists in namespace ${draft.metadata.namespace}; see it with: kubectl nodedisks status claim/${name} -n ${draft.metadata.namespace}`,
          EXIT.conflict,
        );
      }
      throw err;
    }
    if (mode === 'server') return await print(created, 'created (server dry run)');
    if (!args.wait) return await print(created, 'created');
    if (!output) session.io.out(`${claimRef(name)} created\n`);
    const { claim, met } = await waitUsable(session, created, timeoutMs);
    if (!met) {
      throw new PluginError(
        `timed out after ${args.timeout ?? '60s'} waiting for ${claimRef(name)} to bind: ${claimReason(claim)}\nsee it with: kubectl nodedisks status claim/${name} -n ${draft.metadata.namespace}`,
        EXIT.timeout,
      );
    }
    if (output) await print(claim, 'bound');
    else session.io.out(escapeControl(boundLine(claim), true));
  },
};
