// The Grafana dashboard, written with Grafana's foundation SDK (Apache-2.0, a devDependency used only
// here: its types and builders give the dashboard's structure; docs/adr/0033-grafana-dashboard.md).
// `npm run generate` writes kustomize/components/grafana-dashboard/nodedisks-dashboard.json from it, which
// the kustomize component and the chart (a copy in files/, hack/helm/chart-files.ts) put in a ConfigMap
// for Grafana's dashboard sidecar. `--check` exits non-zero when the committed file differs, naming the fix.
//
// Every query reads the controller's, the agents' and the CSI driver's own metrics (controller/metrics.ts,
// agent/metrics.ts, csi/metrics.ts) as the ServiceMonitor and the PodMonitors scrape them: the series of
// the agent pods (agent and csi-node) carry the pod's `node`; the CSI controller's have none.
import { BigValueGraphMode, LegendDisplayMode, LegendPlacement, StackingConfigBuilder, StackingMode, VizLegendOptionsBuilder } from '@grafana/grafana-foundation-sdk/common';
import {
  type Dashboard,
  DashboardBuilder,
  DashboardCursorSync,
  DatasourceVariableBuilder,
  QueryVariableBuilder,
  RowBuilder,
  ThresholdsConfigBuilder,
  ThresholdsMode,
  VariableRefresh,
  VariableSort,
} from '@grafana/grafana-foundation-sdk/dashboard';
import { DataqueryBuilder } from '@grafana/grafana-foundation-sdk/prometheus';
import { PanelBuilder as StatBuilder } from '@grafana/grafana-foundation-sdk/stat';
import { PanelBuilder as TimeseriesBuilder } from '@grafana/grafana-foundation-sdk/timeseries';
import { writeOrCheck } from '../lib/generated-files.ts';

export const DASHBOARD_FILE = 'kustomize/components/grafana-dashboard/nodedisks-dashboard.json';

/** Every panel and query asks the data source the `datasource` variable names, never a fixed one. */
const DATASOURCE = { type: 'prometheus', uid: '${datasource}' };
/** The nodes the panels show (the `node` variable: all of them unless some are picked). */
const NODE = 'node=~"$node"';
/** The CSI driver's calls by side: the controller's pods carry no node; csi-node runs in each agent pod. */
const CSI_CONTROLLER = 'method_name=~"/csi.v1.Controller/.*"';
const CSI_NODE = `method_name=~"/csi.v1.Node/.*", ${NODE}`;

/**
 * The dashboard's template variables and what they stand for in a plain PromQL query: what a test or a
 * real Prometheus is given in their place (Grafana's own `$__rate_interval` is at least four scrape
 * intervals; 5m suits the default 30s–1m scrapes).
 */
export const TEMPLATE_VALUES: Record<string, string> = { __rate_interval: '5m', node: '.*' };

/** A dashboard query as plain PromQL: its template variables replaced by TEMPLATE_VALUES. */
export function concreteExpr(expr: string): string {
  return expr.replace(/\$\{?(\w+)\}?/g, (whole, name: string) => TEMPLATE_VALUES[name] ?? whole);
}

function query(expr: string, legend: string, refId = 'A'): DataqueryBuilder {
  return new DataqueryBuilder().expr(expr).legendFormat(legend).refId(refId).datasource(DATASOURCE);
}

function timeseries(title: string, description: string, unit: string, w: number, queries: DataqueryBuilder[]): TimeseriesBuilder {
  const p = new TimeseriesBuilder()
    .title(title)
    .description(description)
    .datasource(DATASOURCE)
    .unit(unit)
    .min(0)
    .height(8)
    .span(w)
    .legend(new VizLegendOptionsBuilder().displayMode(LegendDisplayMode.Table).placement(LegendPlacement.Right).showLegend(true).calcs(['lastNotNull', 'max']));
  for (const q of queries) p.withTarget(q);
  return p;
}

function stat(title: string, description: string, unit: string, expr: string, red?: number): StatBuilder {
  const p = new StatBuilder().title(title).description(description).datasource(DATASOURCE).unit(unit).height(4).span(4).graphMode(BigValueGraphMode.Area).withTarget(query(expr, title));
  if (red !== undefined) {
    p.thresholds(
      new ThresholdsConfigBuilder().mode(ThresholdsMode.Absolute).steps([
        { value: null, color: 'green' },
        { value: red, color: 'red' },
      ]),
    );
  }
  return p;
}

const stacked = () => new StackingConfigBuilder().mode(StackingMode.Normal);

export function nodeDisksDashboard(): Dashboard {
  const d = new DashboardBuilder('NodeDisks')
    .uid('nodedisks')
    .description('Disks, reservations, agents and the controller of NodeDisks. Generated from hack/dashboards/nodedisks.ts by npm run generate: do not edit.')
    .tags(['nodedisks', 'storage', 'kubernetes'])
    .editable()
    .tooltip(DashboardCursorSync.Crosshair)
    .refresh('30s')
    .time({ from: 'now-6h', to: 'now' })
    .timezone('browser')
    .withVariable(new DatasourceVariableBuilder('datasource').label('Data source').type('prometheus'))
    .withVariable(
      new QueryVariableBuilder('node')
        .label('Node')
        .datasource(DATASOURCE)
        .query({ qryType: 1, query: 'label_values(nodedisks_controller_nodedisks, node)', refId: 'PrometheusVariableQueryEditor-VariableQuery' })
        .definition('label_values(nodedisks_controller_nodedisks, node)')
        .refresh(VariableRefresh.OnTimeRangeChanged)
        .sort(VariableSort.AlphabeticalAsc)
        .multi(true)
        .includeAll(true)
        .allValue('.*'),
    )
    .withRow(new RowBuilder('Overview'))
    .withPanel(
      stat(
        'Free disks',
        'Disks desired Available and reported Available: what a reservation can take.',
        'short',
        `sum(nodedisks_controller_nodedisks{desired="Available", phase="Available", ${NODE}}) or vector(0)`,
      ),
    )
    .withPanel(stat('Reserved disks', 'Disks whose desired state is Reserved, whoever holds them.', 'short', `sum(nodedisks_controller_nodedisks{desired="Reserved", ${NODE}}) or vector(0)`))
    .withPanel(
      stat(
        'Missing or Error',
        'Disks whose agent reports them Missing (the image file is gone) or Error.',
        'short',
        `sum(nodedisks_controller_nodedisks{phase=~"Missing|Error", ${NODE}}) or vector(0)`,
        1,
      ),
    )
    .withPanel(
      stat(
        'Refused reservations',
        'Disks whose Accepted condition is False: a reservation the controller refused or is in conflict with.',
        'short',
        `sum(nodedisks_controller_nodedisks{accepted="False", ${NODE}}) or vector(0)`,
        1,
      ),
    )
    .withPanel(
      stat(
        'Free capacity',
        'Bytes of the free disks, as the agents report them.',
        'bytes',
        `sum(nodedisks_controller_nodedisk_capacity_bytes{desired="Available", phase="Available", ${NODE}}) or vector(0)`,
      ),
    )
    .withPanel(stat('Controller leader', '1 while a controller replica leads; 0 (or nothing scraped) means nothing is decided.', 'short', '(max(nodedisks_controller_leader) or vector(0))'))
    .withRow(new RowBuilder('Disks and reservations'))
    .withPanel(
      timeseries('Disks by phase per node', 'NodeDisks by the phase their agent reports, per node (an empty phase: not reported yet).', 'short', 12, [
        query(`sum by (node, phase) (nodedisks_controller_nodedisks{${NODE}})`, '{{node}} {{phase}}'),
      ]).stacking(stacked()),
    )
    .withPanel(
      timeseries('Reservations by kind of owner', 'Reserved disks by who holds them: the label policy, a claim, recovered from a marker file, or a person (manual).', 'short', 12, [
        query(`sum by (owner) (nodedisks_controller_nodedisks{desired="Reserved", ${NODE}})`, '{{owner}}'),
      ]).stacking(stacked()),
    )
    .withPanel(
      timeseries('Free and reserved capacity per node', 'Bytes of free disks (desired and reported Available) and of reserved ones, per node.', 'bytes', 24, [
        query(`sum by (node) (nodedisks_controller_nodedisk_capacity_bytes{desired="Available", phase="Available", ${NODE}})`, 'free {{node}}', 'A'),
        query(`sum by (node) (nodedisks_controller_nodedisk_capacity_bytes{desired="Reserved", ${NODE}})`, 'reserved {{node}}', 'B'),
      ]),
    )
    .withRow(new RowBuilder('Agents'))
    .withPanel(
      timeseries(
        'Agent heartbeat age',
        "Seconds since the controller saw each node's heartbeat Lease renewed. Past the Lease's duration the node's disks turn stale (Ready reason AgentStale).",
        's',
        12,
        [query(`max by (node) (nodedisks_controller_agent_heartbeat_age_seconds{${NODE}})`, '{{node}}')],
      ),
    )
    .withPanel(
      timeseries('Heartbeat renewals and marker errors', 'Failed heartbeat Lease renewals and marker files that could not be written or removed, per node, per second.', 'ops', 12, [
        query(`sum by (node) (rate(nodedisks_agent_heartbeat_renewals_total{result="failed", ${NODE}}[$__rate_interval]))`, 'renewal failed {{node}}', 'A'),
        query(`sum by (node, op) (rate(nodedisks_agent_marker_operation_errors_total{${NODE}}[$__rate_interval]))`, 'marker {{op}} failed {{node}}', 'B'),
      ]),
    )
    .withRow(new RowBuilder('Health'))
    .withPanel(
      timeseries(
        'Failing disks per node',
        "Disks whose agent saw the kernel report IO or filesystem errors on them and that no person has marked checked since (kubectl nodedisks uncordon): handed out by nobody. The NodeDisk's Healthy condition says what was seen (runbook NodeDisksDiskFailing).",
        'short',
        24,
        [query(`sum by (node) (nodedisks_agent_failing_disks{${NODE}})`, '{{node}}')],
      ).stacking(stacked()),
    )
    .withRow(new RowBuilder('Controller'))
    .withPanel(
      timeseries('Work queue depth', 'Keys waiting in the work queue of each controller replica (the leader works; a standby shows its last term).', 'short', 8, [
        query('max by (pod) (nodedisks_controller_workqueue_depth)', '{{pod}}'),
      ]),
    )
    .withPanel(
      timeseries('Reconcile latency', 'Reconcile duration quantiles over all replicas.', 's', 8, [
        query('histogram_quantile(0.5, sum by (le) (rate(nodedisks_controller_reconcile_duration_seconds_bucket[$__rate_interval])))', 'p50', 'A'),
        query('histogram_quantile(0.99, sum by (le) (rate(nodedisks_controller_reconcile_duration_seconds_bucket[$__rate_interval])))', 'p99', 'B'),
      ]),
    )
    .withPanel(
      timeseries('Reconciles by result', 'Reconciles per second, by result (an error is retried with backoff).', 'ops', 8, [
        query('sum by (result) (rate(nodedisks_controller_reconcile_total[$__rate_interval]))', '{{result}}'),
      ]),
    )
    .withRow(new RowBuilder('CSI driver'))
    .withPanel(
      timeseries(
        'CSI calls by method and result',
        "Calls the CSI driver served per second, by method and gRPC status: its controller side's (no node), and the node side's (csi-node) on the nodes picked. Aborted and ResourceExhausted are retried by the caller; Internal and Unavailable are worth a look in the logs.",
        'reqps',
        12,
        [
          query(`sum by (method_name, grpc_status_code) (rate(nodedisks_csi_operations_seconds_count{${CSI_CONTROLLER}}[$__rate_interval]))`, '{{method_name}} {{grpc_status_code}}', 'A'),
          query(`sum by (method_name, grpc_status_code) (rate(nodedisks_csi_operations_seconds_count{${CSI_NODE}}[$__rate_interval]))`, '{{method_name}} {{grpc_status_code}}', 'B'),
        ],
      ),
    )
    .withPanel(
      timeseries(
        'CSI call latency p95',
        "95th percentile of each CSI method's time in the driver, from the call's arrival to its answer: the controller side's, and the node side's on the nodes picked (NodeStageVolume includes mkfs; DeleteVolume is the release, not the wipe).",
        's',
        12,
        [
          query(`histogram_quantile(0.95, sum by (le, method_name) (rate(nodedisks_csi_operations_seconds_bucket{${CSI_CONTROLLER}}[$__rate_interval])))`, '{{method_name}}', 'A'),
          query(`histogram_quantile(0.95, sum by (le, method_name) (rate(nodedisks_csi_operations_seconds_bucket{${CSI_NODE}}[$__rate_interval])))`, '{{method_name}}', 'B'),
        ],
      ),
    )
    .withRow(new RowBuilder('API errors'))
    .withPanel(
      timeseries('Controller API errors', 'Requests of the controller the API server refused (by HTTP code) or that got no answer (code none), per second.', 'reqps', 12, [
        query('sum by (verb, code) (rate(nodedisks_controller_api_errors_total[$__rate_interval]))', '{{verb}} {{code}}'),
      ]),
    )
    .withPanel(
      timeseries('Agent API errors', "Agents' failed API requests by operation, per node, per second.", 'reqps', 12, [
        query(`sum by (node, op) (rate(nodedisks_agent_api_errors_total{${NODE}}[$__rate_interval]))`, '{{node}} {{op}}'),
      ]),
    )
    .build();
  // Ids in the order of the panels (rows included), so they are unique and stay put as long as the order does.
  for (const [i, p] of (d.panels ?? []).entries()) p.id = i + 1;
  return d;
}

/** The file's text: the dashboard as JSON, two-space indented, one newline at the end. */
export function dashboardJson(): string {
  return `${JSON.stringify(nodeDisksDashboard(), null, 2)}\n`;
}

if (import.meta.main) {
  writeOrCheck([{ path: DASHBOARD_FILE, content: dashboardJson() }], 'hack/dashboards/nodedisks.ts');
}
