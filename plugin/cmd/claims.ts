// kubectl nodedisks claims [-n NS | -A] [-o wide|name|yaml|json]: the NodeDiskClaims, printed as
// `kubectl get ndc` prints them (the API server's Table of the CRD's printer columns: NAME STATUS DISK NODE
// CAPACITY AGE, wide adds MESSAGE; -A puts NAMESPACE first). test/integration/plugin-claims.test.ts holds
// the two side by side.
import type { CommandSpec } from '../args.ts';
import { claimsPath } from '../../api/claim-client.ts';
import type { NodeDiskClaim } from '../../api/v1alpha1/claim-types.ts';
import { listPages } from '../../lib/kube/pager.ts';
import { claimRef, type ClaimTable } from '../claim-model.ts';
import type { Session } from '../context.ts';
import { usageError } from '../errors.ts';
import { tableCellText } from '../escape.ts';
import { TabWriter } from '../kubectl/tabwriter.ts';
import { NAMESPACE_FLAG, printClaims } from './claim.ts';

export interface ClaimsArgs {
  namespace?: string | undefined;
  'all-namespaces'?: boolean | undefined;
  output?: string | undefined;
  'no-headers'?: boolean | undefined;
}

/** A Table cell as kubectl prints it: missing is blank, the rest as it is, escaped for the terminal. */
const cellText = (v: unknown): string => (v === null || v === undefined ? '' : tableCellText(typeof v === 'object' ? JSON.stringify(v) : String(v)));

/** The rows kubectl get prints of the server's Table pages: the header first (unless `noHeaders`). */
export function claimTableRows(pages: ClaimTable[], o: { wide: boolean; allNamespaces: boolean; noHeaders: boolean }): string[][] {
  const rows: string[][] = [];
  for (const page of pages) {
    const defs = (page.columnDefinitions ?? []).map((c, i) => ({ ...c, i })).filter((c) => o.wide || !c.priority);
    for (const r of page.rows ?? []) {
      if (rows.length === 0 && !o.noHeaders) rows.push([...(o.allNamespaces ? ['NAMESPACE'] : []), ...defs.map((c) => c.name.toUpperCase())]);
      rows.push([...(o.allNamespaces ? [cellText(r.object?.metadata?.namespace)] : []), ...defs.map((c) => cellText(r.cells[c.i]))]);
    }
  }
  return rows;
}

export const claimsCommand: CommandSpec<ClaimsArgs> = {
  name: 'claims',
  summary: 'List NodeDiskClaims, exactly as kubectl get ndc prints them',
  description:
    "List the NodeDiskClaims of a namespace (by default the kubeconfig context's) or of all of them (-A), exactly as kubectl get nodediskclaims prints them: NAME STATUS DISK NODE CAPACITY AGE, and with -o wide the MESSAGE that says why a claim is Pending. " +
    'Explain one claim, and where its disk is, with: kubectl nodedisks status claim/NAME.',
  positionals: [],
  flags: {
    namespace: NAMESPACE_FLAG,
    'all-namespaces': { type: 'boolean', short: 'A', default: false, describe: 'List the claims of every namespace' },
    output: { type: 'string', short: 'o', describe: 'Output format: wide, name, yaml or json' },
    'no-headers': { type: 'boolean', default: false, describe: 'When using the default or wide output format, do not print headers' },
  },
  examples: [
    ['kubectl nodedisks claims -n team-a', 'The claims of team-a: which disk, where, how big'],
    ['kubectl nodedisks claims -A -o wide', 'Every claim, with why the Pending ones are Pending'],
  ],
  run: async (session: Session, args: ClaimsArgs): Promise<void> => {
    const output = args.output;
    if (output !== undefined && !['wide', 'name', 'yaml', 'json'].includes(output)) throw usageError(`-o/--output for claims is wide, name, yaml or json, got ${JSON.stringify(output)}`);
    const all = args['all-namespaces'] === true;
    // kubectl takes -n with -A and lists every namespace.
    const namespace = all ? undefined : session.namespace(args.namespace);
    const rest = session.restClient();
    const none = () => session.io.err(all ? 'No resources found\n' : `No resources found in ${namespace} namespace.\n`);
    if (output === 'yaml' || output === 'json') {
      const items: NodeDiskClaim[] = [];
      for await (const page of listPages((cont) => session.claims().list(namespace, { limit: 500, continue: cont }))) items.push(...page.items);
      await printClaims(items, output, false, session.io.out);
      return;
    }
    const pages: ClaimTable[] = [];
    const fetch = (cont: string | undefined) =>
      rest.request<ClaimTable>('GET', claimsPath(namespace), { query: { limit: 500, continue: cont, includeObject: 'Metadata' }, accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' });
    for await (const page of listPages(fetch)) pages.push(page);
    const count = pages.reduce((n, p) => n + (p.rows?.length ?? 0), 0);
    if (count === 0) return none();
    if (output === 'name') {
      session.io.out(pages.flatMap((p) => (p.rows ?? []).map((r) => `${claimRef(tableCellText(String(r.object?.metadata?.name ?? r.cells[0] ?? '')))}\n`)).join(''));
      return;
    }
    const rows = claimTableRows(pages, { wide: output === 'wide', allNamespaces: all, noHeaders: args['no-headers'] === true });
    session.io.out(new TabWriter().format(rows));
  },
};
