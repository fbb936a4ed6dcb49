// kubectl nodedisks list|get [NAME…] [-l SELECTOR] [--node N] [--phase P] [--desired S] [-o FORMAT]
import type { Argv } from 'yargs';
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

export function selectionOptions<T>(y: Argv<T>) {
  return y
    .option('selector', { alias: 'l', type: 'string', describe: 'Label selector, e.g. localtest.example.com/node=node-a' })
    .option('node', { type: 'string', describe: 'Only disks of this node (field selector spec.nodeName)' })
    .option('phase', { type: 'string', describe: 'Only disks in this reported phase: Available, Reserved, Missing, Error, Discovered' })
    .option('desired', { type: 'string', describe: 'Only disks with this desired state: Available or Reserved' })
    .option('chunk-size', { type: 'number', default: 500, describe: 'Read the list this many objects at a time' });
}

export const listCommand = {
  command: 'list [names..]',
  aliases: ['get'],
  describe: 'List NodeDisks as a table, like kubectl get',
  builder: (y: Argv) =>
    selectionOptions(y)
      .positional('names', { type: 'string', array: true, default: [] as string[], describe: 'NodeDisk names' })
      .option('output', { alias: 'o', type: 'string', describe: 'wide, json, yaml, name or jsonpath=TEMPLATE' })
      .option('no-headers', { type: 'boolean', default: false, describe: 'Print tables without the header line' })
      .example('$0 list -o wide', 'all disks, with owner, capacity, readiness and age')
      .example('$0 list --node node-a --phase Available', 'free disks of one node')
      .example("$0 get -l localtest.example.com/auto-reserve=true -o name", 'disks reserved through the label'),
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
