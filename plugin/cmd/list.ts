// kubectl nodedisks list|get [NAME…] [-l SELECTOR] [--field-selector F] [--node N] [--phase P] [--desired S]
// [-o FORMAT] [--sort-by P] [--show-labels] [-L KEY] [--no-headers]: prints what `kubectl get nodedisks`
// prints for the same arguments (test/integration/kubectl-parity.test.ts holds the two side by side).
import type { CommandSpec } from '../args.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import type { Session } from '../context.ts';
import { parseOutput, printNodeDisks } from '../kubectl/printers.ts';
import { checkNames, hasSelection, selected, selectedPages, type SelectionFlags } from '../select.ts';
import { listOutput } from '../kubectl/list-output.ts';
import { sortItems } from '../kubectl/sort.ts';
import { SELECTION_FLAGS } from './flags.ts';
import { watchList } from './list-watch.ts';
import { EXIT, ReportedError, usageError } from '../errors.ts';
import { escapeControl } from '../escape.ts';

export interface ListArgs extends SelectionFlags {
  names: string[];
  output?: string | undefined;
  'no-headers'?: boolean | undefined;
  'sort-by'?: string | undefined;
  'show-labels'?: boolean | undefined;
  'label-columns'?: string[] | undefined;
  namespace?: string | undefined;
  'all-namespaces'?: boolean | undefined;
  watch?: boolean | undefined;
  'watch-only'?: boolean | undefined;
}

/** kubectl's "Error from server (NotFound): nodedisks.localtest.example.com "x" not found". */
const serverError = (err: ApiError) => escapeControl(`Error from server (${err.reason ?? err.statusCode}): ${err.message}`, true) + '\n';

export const listCommand: CommandSpec<ListArgs> = {
  name: 'list',
  aliases: ['get'],
  summary: 'List NodeDisks, exactly as kubectl get nodedisks prints them',
  description:
    'List NodeDisks, exactly as kubectl get nodedisks prints them: NAME NODE DISK DESIRED PHASE, and with -o wide OWNER CAPACITY READY CORDONED AGE. ' +
    'For a per-node summary with readable sizes, see kubectl nodedisks status.',
  positionals: [{ name: 'names', describe: 'NodeDisk names', variadic: true }],
  flags: {
    ...SELECTION_FLAGS,
    output: { type: 'string', short: 'o', describe: 'Output format: wide, json, yaml, name, jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=SPEC or custom-columns-file=FILE' },
    'no-headers': { type: 'boolean', default: false, describe: 'When using the default, wide or custom-columns output format, do not print headers' },
    'sort-by': { type: 'string', describe: 'Sort by this JSONPath expression, e.g. .status.node.capacityBytes' },
    'show-labels': { type: 'boolean', default: false, describe: 'Show all labels as the last column' },
    'label-columns': { type: 'string', short: 'L', multiple: true, describe: 'Labels to show as columns (comma-separated or repeated)' },
    namespace: { type: 'string', short: 'n', describe: 'Accepted and ignored, as kubectl does: NodeDisks are cluster-scoped' },
    'all-namespaces': { type: 'boolean', short: 'A', default: false, describe: 'Accepted and ignored, as kubectl does: NodeDisks are cluster-scoped' },
    watch: { type: 'boolean', short: 'w', default: false, describe: 'After listing, watch for changes and print each changed disk' },
    'watch-only': { type: 'boolean', default: false, describe: 'Watch for changes without listing first' },
  },
  examples: [
    ['kubectl nodedisks list -o wide', 'List all disks with owner, capacity, readiness and age'],
    ['kubectl nodedisks list --field-selector spec.nodeName=node-a,status.node.phase=Available', 'List the free disks of one node'],
    ['kubectl nodedisks get -l localtest.example.com/auto-reserve=true -o name', 'List the disks reserved through the label'],
    ['kubectl nodedisks list -o jsonpath=\'{range .items[*]}{.metadata.labels.localtest\\.example\\.com/node}{"\\n"}{end}\'', 'Print a dotted label of each disk'],
  ],
  run: async (session: Session, args: ListArgs): Promise<void> => {
    const format = parseOutput(args.output);
    if (args.names.length && hasSelection(args)) throw usageError('name disks or select them with -l/--field-selector/--node/--phase/--desired, not both');
    checkNames(args.names);
    const options = {
      format,
      single: args.names.length === 1,
      noHeaders: args['no-headers'] ?? false,
      showLabels: args['show-labels'] ?? false,
      labelColumns: (args['label-columns'] ?? []).flatMap((l) => l.split(',')).filter(Boolean),
    };
    if (args.watch || args['watch-only']) {
      if (args.names.length > 1) throw usageError(`watch is only supported on individual resources and resource collections, but ${args.names.length} resources were found`);
      return await watchList(session, args.names, args, options, args['watch-only'] ?? false);
    }
    const client = session.client();
    let items: NodeDisk[] = [];
    const errors: ApiError[] = [];
    if (args.names.length) {
      // Like kubectl: every name is fetched; the missing ones are reported after the others are printed.
      for (const name of args.names) {
        try {
          items.push(await client.get(name));
        } catch (err) {
          if (!(err instanceof ApiError) || err.statusCode !== 404 || !err.status.details?.name) throw err;
          errors.push(err);
        }
      }
    } else if (!args['sort-by']) {
      // Each page becomes its printed text as it arrives; all is printed after the last page, as kubectl
      // does (one table aligned across --chunk-size pages, nothing printed if a page fails).
      const output = listOutput(options);
      for await (const page of selectedPages(session, args, output.wantsTable)) {
        if (page.table) output.addTable(page.table);
        else await output.addItems(page.items ?? []);
      }
      await output.end(session.io.out);
      if (output.count === 0 && (format.kind === 'table' || format.kind === 'wide')) session.io.err('No resources found\n');
      return;
    } else {
      // Sorting needs every object (kubectl even asks for them in one response when sorting).
      for await (const page of selected(session, args)) items.push(...page);
    }
    if (args['sort-by']) items = sortItems(items, args['sort-by']);
    await printNodeDisks(items, options, session.io.out);
    if (errors.length) {
      for (const err of errors) session.io.err(serverError(err));
      throw new ReportedError('not found', EXIT.notFound);
    }
    if (items.length === 0 && (format.kind === 'table' || format.kind === 'wide')) session.io.err('No resources found\n');
  },
};
