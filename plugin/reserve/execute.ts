// Carrying out the plans of ./plan.ts: each write guarded by the resourceVersion its plan was made from,
// a confirmation line per disk, and for "give me a disk" another free disk after losing one to someone
// faster (docs/adr/0013-handing-out-a-free-disk.md).
import type { JsonPatchOp, NodeDiskApply } from '../../api/client.ts';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { ApiError } from '../../lib/kube/errors.ts';
import { jittered, sleep } from '../../lib/runtime/backoff.ts';
import type { Session } from '../context.ts';
import { EXIT, PluginError } from '../errors.ts';
import { qualifiedName } from '../kubectl/printers.ts';
import { resolveTargets, type SelectionFlags } from '../select.ts';
import { applyResolving, ChangedMeanwhile, guarded, type ApplyFlags } from './ownership.ts';
import { chooseFree, planReserve, type Action, type Plan, type Request } from './plan.ts';

/** What is sent: an apply body (with its resourceVersion precondition), or a JSON Patch. */
export type Patch = NodeDiskApply | { name: string; jsonPatch: JsonPatchOp[] };

export interface Run {
  mode: 'none' | 'client' | 'server';
  /** -o yaml|json: the patches (or the server's answers) are printed instead of confirmation lines. */
  quiet: boolean;
  flags: ApplyFlags;
}

/** What carrying plans out did: the patches sent, and with --dry-run=server the objects as the API server answered. */
export interface Outcome {
  patches: Patch[];
  answers: NodeDisk[];
}

/** Carries out one plan: its writes (unless a client dry run) and its confirmation line. */
async function carryOut(session: Session, plan: Plan, r: Run): Promise<Outcome> {
  const client = session.client();
  const done: Outcome = { patches: [], answers: [] };
  if (plan.skip) {
    if (!r.quiet) session.io.out(`${qualifiedName(plan.nd)} unchanged (${plan.skip})\n`);
    // Nothing to send; kubectl apply prints the object as it stands in that case too.
    done.answers.push(plan.nd);
    return done;
  }
  for (const step of plan.steps) {
    if ('patch' in step) {
      done.patches.push({ name: step.name, jsonPatch: step.patch });
      if (r.mode !== 'client') {
        try {
          done.answers.push(await client.jsonPatch(step.name, step.patch, { fieldManager: r.flags.fieldManager, dryRun: r.flags.dryRun }));
        } catch (err) {
          if (err instanceof ApiError && (err.statusCode === 422 || err.statusCode === 409) && /test/i.test(err.message)) {
            throw new PluginError(`${step.name} changed while it was being released; run the command again`, EXIT.conflict);
          }
          throw err;
        }
      }
      continue;
    }
    // What is sent, precondition included: the resourceVersion the plan was made from.
    const body = guarded(step.body, plan.nd.metadata.resourceVersion);
    done.patches.push(body);
    if (r.mode !== 'client') done.answers.push(await applyResolving(client, body, r.flags));
  }
  if (!r.quiet) session.io.out(`${qualifiedName(plan.nd)} ${plan.verb}${r.mode !== 'none' ? ` (dry run: ${r.mode})` : ''}\n`);
  return done;
}

/** Carries out every plan, in order; the first failure stops the rest. */
export async function carryOutEach(session: Session, plans: Plan[], action: Action, r: Run): Promise<Outcome> {
  const all: Outcome = { patches: [], answers: [] };
  let n = 0;
  for (const plan of plans) {
    session.io.progress(`${action} ${++n}/${plans.length} ${plan.nd.metadata.name}`);
    const done = await carryOut(session, plan, r);
    all.patches.push(...done.patches);
    all.answers.push(...done.answers);
  }
  return all;
}

/** How often `reserve --node` re-reads the node and tries its next free disk after losing one to someone faster. */
const PICK_ATTEMPTS = 10;

/**
 * "Give me a disk": the first free, usable disk (by name) of the selection. People asking at the same
 * time race for the same disk; the write is guarded by the resourceVersion it was picked at, so the loser
 * never overwrites the winner: it re-reads the selection and tries the next free disk. Only the attempt
 * that won is reported.
 */
export async function reserveOneFree(session: Session, selection: SelectionFlags, req: Request, r: Run): Promise<Outcome> {
  for (let attempt = 1; ; attempt++) {
    const disk = chooseFree(await resolveTargets(session, [], selection), selection);
    session.io.progress(`reserve ${disk.metadata.name}`);
    try {
      return await carryOut(session, planReserve(disk, req), r);
    } catch (err) {
      if (!(err instanceof ChangedMeanwhile) || attempt >= PICK_ATTEMPTS) throw err;
      // Someone else was faster. A short random pause, so the losers do not collide again in step.
      await sleep(jittered(20 * attempt, 2));
    }
  }
}
