// Events (events.k8s.io/v1) about NodeDisks: what the policy did, and what it refused to do.
// NodeDisks are cluster-scoped, so their events live in the "default" namespace, as kubectl expects.
import { randomBytes } from 'node:crypto';
import { API_VERSION, KIND } from '../api/constants.ts';
import type { NodeDisk } from '../api/v1alpha1/types.ts';
import type { RestClient } from '../lib/kube/rest.ts';
import type { Logger } from '../lib/runtime/log.ts';

export const REPORTING_CONTROLLER = 'localtest.example.com/node-disks-operator';

export class EventRecorder {
  private readonly rest: RestClient;
  private readonly instance: string;
  private readonly log: Logger;
  constructor(rest: RestClient, instance: string, log: Logger) {
    this.rest = rest;
    this.instance = instance;
    this.log = log;
  }

  /** Best effort: an event that cannot be recorded is logged, never fails a reconcile. */
  async record(nd: NodeDisk, type: 'Normal' | 'Warning', reason: string, action: string, note: string): Promise<void> {
    const name = `${nd.metadata.name}.${Date.now().toString(16)}${randomBytes(2).toString('hex')}`;
    try {
      await this.rest.request('POST', '/apis/events.k8s.io/v1/namespaces/default/events', {
        body: {
          apiVersion: 'events.k8s.io/v1',
          kind: 'Event',
          metadata: { name, namespace: 'default' },
          eventTime: new Date().toISOString().replace(/Z$/, '000Z'),
          reportingController: REPORTING_CONTROLLER,
          reportingInstance: this.instance.slice(0, 128),
          action,
          reason,
          note: note.slice(0, 1024),
          type,
          regarding: { apiVersion: API_VERSION, kind: KIND, name: nd.metadata.name, uid: nd.metadata.uid, resourceVersion: nd.metadata.resourceVersion },
        },
        timeoutMs: 10_000,
      });
    } catch (err) {
      if (cancelled(err)) return; // the term ended: not worth a warning per event
      this.log.warn('could not record event', { reason, nodeDisk: nd.metadata.name, error: (err as Error).message });
    }
  }
}

/** The request was stopped by its term ending (shutdown, or leadership lost), not refused. */
function cancelled(err: unknown): boolean {
  const e = err as Error & { cause?: Error };
  return [e.name, e.cause?.name].some((n) => n === 'AbortError' || n === 'NotLeaderError');
}
