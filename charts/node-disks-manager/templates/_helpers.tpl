{{/*
The namespace of every namespaced object: namespace.name, else the release namespace. Whoever may create
Pods or ServiceAccount tokens there holds the controller's and the agent's rights (docs/adr/0031-helm-chart.md),
so namespace.name is never a namespace everyone shares, and one other than the release namespace is one
the chart creates: helm then refuses a namespace that exists already and is not this release's (a team's).
The release namespace is the choice of whoever runs helm, not a value (helm lint and template use default).
*/}}
{{- define "nd.namespace" -}}
{{- $ns := .Values.namespace.name | default .Release.Namespace -}}
{{- if has .Values.namespace.name (list "default" "kube-system" "kube-public" "kube-node-lease") }}
{{- fail (printf "namespace.name %q is shared: whoever may create Pods or ServiceAccount tokens there holds the controller's and the agent's rights over every NodeDisk. Use a namespace of its own (-n node-disks-system --create-namespace, or namespace.name)" .Values.namespace.name) }}
{{- end }}
{{- if and .Values.namespace.name (ne .Values.namespace.name .Release.Namespace) (not .Values.namespace.create) }}
{{- fail (printf "namespace.name %q is not the release namespace, so the chart must create it (namespace.create: true): an existing namespace may be a team's, whose editors could then mint the controller's token. To use a namespace made beforehand, install the release into it (-n %s) and leave namespace.name empty" .Values.namespace.name .Values.namespace.name) }}
{{- end }}
{{- $ns -}}
{{- end -}}

{{/* The disk dir on the host: <agent.hostPathRoot>/disks. */}}
{{- define "nd.diskDir" -}}
{{- printf "%s/disks" (trimSuffix "/" .Values.agent.hostPathRoot) -}}
{{- end -}}

{{/*
Helm's standard labels and commonLabels, on every object (the drift test leaves out the standard ones).
commonLabels may neither set a label the objects set themselves (the copies of kustomize/ keep their own
labels in any case) nor aggregate a ClusterRole into the built-in ones: the controller's and the agent's
ClusterRoles carry commonLabels too.
*/}}
{{- define "nd.labels" -}}
{{- range $k, $_ := .Values.commonLabels }}
{{- if hasPrefix "rbac.authorization.k8s.io/aggregate-to-" $k }}
{{- fail (printf "commonLabels may not set %s: it would aggregate the controller's and the agent's ClusterRoles into the built-in roles (admin, edit, view), giving their rights to everyone bound to those. Set it on roles of your own instead" $k) }}
{{- end }}
{{- if or (has $k (list "app.kubernetes.io/name" "app.kubernetes.io/component" "app.kubernetes.io/part-of" "app.kubernetes.io/instance" "app.kubernetes.io/managed-by" "app.kubernetes.io/version")) (hasPrefix "helm.sh/" $k) (hasPrefix "localtest.example.com/" $k) (hasPrefix "pod-security.kubernetes.io/" $k) }}
{{- fail (printf "commonLabels may not set %s: the chart's objects set it themselves (selectors, roles and Pod Security read it). Use a label key of your own" $k) }}
{{- end }}
{{- end }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.annotations of every object, if any: commonAnnotations merged with the object's own (a dict). */}}
{{- define "nd.annotations" -}}
{{- $all := merge (dict) (.extra | default dict) .root.Values.commonAnnotations -}}
{{- with $all }}
annotations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* An image reference: repository@digest when a digest is set, else repository:tag. */}}
{{- define "nd.image" -}}
{{- if .digest -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}
{{- end -}}

{{/* Pull secrets of a pod: the global ones, then the workload's own (root, w = the workload's values). */}}
{{- define "nd.pullSecrets" -}}
{{- $names := concat .root.Values.imagePullSecrets .w.imagePullSecrets | uniq -}}
{{- with $names }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Scheduling of a pod (w = the workload's values): nodeSelector, affinity, tolerations, priorityClassName. */}}
{{- define "nd.scheduling" -}}
{{- with .nodeSelector }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/*
A file of files/ (copied verbatim from kustomize/ by npm run generate), one object per YAML document, with
Helm's labels and commonAnnotations added and namespaced objects, ServiceAccount subjects and the policy
bindings' ServiceAccount and namespace moved to the chart's namespace. Arguments: root, file, and
optionally annotations (a dict), labels (a dict, under the file's own) and replace (a list of [old, new]
strings, each of which must occur in the file).
*/}}
{{- define "nd.copied" -}}
{{- $root := .root -}}
{{- $text := $root.Files.Get .file -}}
{{- $ns := include "nd.namespace" $root -}}
{{- range .replace }}
{{- if not (contains (index . 0) $text) }}
{{- fail (printf "%s no longer contains %q: update the chart's template that replaces it" $.file (index . 0)) }}
{{- end }}
{{- $text = replace (index . 0) (index . 1) $text -}}
{{- end }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" $text -1 }}
{{- $obj := fromYaml $doc }}
{{- if $obj }}
{{- /* The file's own labels first: merge keeps the first dict's value of a key. */}}
{{- $labels := merge ($obj.metadata.labels | default dict) ($.labels | default dict) (include "nd.labels" $root | fromYaml) }}
{{- $_ := set $obj.metadata "labels" $labels }}
{{- if $obj.metadata.namespace }}
{{- $_ := set $obj.metadata "namespace" $ns }}
{{- end }}
{{- range $obj.subjects | default list }}
{{- if eq .kind "ServiceAccount" }}
{{- $_ := set . "namespace" $ns }}
{{- end }}
{{- end }}
{{- /* A policy's binding names its ServiceAccount and Leases by the install's namespace (ADR 28). */}}
{{- if eq $obj.kind "ValidatingAdmissionPolicyBinding" }}
{{- with $obj.spec.paramRef }}
{{- $_ := set . "namespace" $ns }}
{{- end }}
{{- with $obj.spec.matchResources }}
{{- with .namespaceSelector }}
{{- with .matchLabels }}
{{- if hasKey . "kubernetes.io/metadata.name" }}
{{- $_ := set . "kubernetes.io/metadata.name" $ns }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- $annotations := merge (dict) ($.annotations | default dict) $root.Values.commonAnnotations ($obj.metadata.annotations | default dict) }}
{{- if $annotations }}
{{- $_ := set $obj.metadata "annotations" $annotations }}
{{- end }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end -}}
