// kubectl nodedisks list|get [NAME…] [-l SELECTOR] [--node N] [--phase P] [--desired S] [-o FORMAT]
import type { CommandSpec, FlagSpec } from '../args.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import type { Session } from '../context.ts';
import { parseOutput, printNodeDisks } from '../printers.ts';
import { hasSelection, selected, type SelectionFlags } from '../select.ts';
import { usageError } from '../errors.ts';

export interface ListArgs extends SelectionFlags {
  names: string[];
  output?: string | undefined;
  'no-headers'?: boolean | undefined;
}

export const SELECTION_FLAGS: Record<string, FlagSpec> = {
  selector: { type: 'string', short: 'l', describe: 'Selector (label query) to filter on, e.g. localtest.example.com/node=node-a' },
  node: { type: 'string', describe: 'Only disks of this node (field selector spec.nodeName)' },
  phase: { type: 'string', describe: 'Only disks in this reported phase: Available, Reserved, Missing, Error or Discovered' },
  desired: { type: 'string', describe: 'Only disks with this desired state: Available or Reserved' },
  'chunk-size': { type: 'string', integer: true, default: '500', describe: 'Return large lists in chunks of this many objects' },
};

export const listCommand: CommandSpec<ListArgs> = {
  name: 'list',
  aliases: ['get'],
  summary: 'List NodeDisks as a table, like kubectl get',
  description: 'List NodeDisks as a table, like kubectl get: NAME NODE DISK DESIRED PHASE, and with -o wide OWNER CAPACITY READY AGE.',
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: {
    ...SELECTION_FLAGS,
    output: { type: 'string', short: 'o', describe: 'Output format: wide, json, yaml, name or jsonpath=TEMPLATE' },
    'no-headers': { type: 'boolean', default: false, describe: 'When using the default or wide output format, do not print headers' },
  },
  examples: [
    ['kubectl nodedisks list -o wide', 'List all disks with owner, capacity, readiness and age'],
    ['kubectl nodedisks list --node node-a --phase Available', 'List the free disks of one node'],
    ['kubectl nodedisks get -l localtest.example.com/auto-reserve=true -o name', 'List the disks reserved through the label'],
  ],
  run: async (session: Session, args: ListArgs): Promise<void> => {
    const format = parseOutput(args.output);
    if (args.names.length && hasSelection(args)) throw usageError('name disks or select them with -l/--node/--phase/--desired, not both');
    const client = session.client();
    const pages: AsyncIterable<NodeDisk[]> = args.names.length
      ? (async function* () {
          for (const name of args.names) yield [await client.get(name)];
        })()
      : selected(session, args);
    const n = await printNodeDisks(pages, format, session.io.out, args['no-headers']);
    if (n === 0 && (format.kind === 'table' || format.kind === 'wide')) session.io.err('No resources found\n');
  },
};
