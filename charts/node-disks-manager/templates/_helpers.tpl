{{/* The namespace of every namespaced object: namespace.name, else the release namespace. */}}
{{- define "nd.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end -}}

{{/* The disk dir on the host: <agent.hostPathRoot>/disks. */}}
{{- define "nd.diskDir" -}}
{{- printf "%s/disks" (trimSuffix "/" .Values.agent.hostPathRoot) -}}
{{- end -}}

{{/* Helm's standard labels and commonLabels, on every object (the drift test leaves out the standard ones). */}}
{{- define "nd.labels" -}}
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
{{- $labels := merge (include "nd.labels" $root | fromYaml) ($.labels | default dict) ($obj.metadata.labels | default dict) }}
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
