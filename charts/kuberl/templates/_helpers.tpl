{{/* Names, labels and the operator's RBAC rules, shared by every template. */}}

{{- define "kuberl.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-<chart>, or just <release> when it already names the chart. */}}
{{- define "kuberl.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kuberl.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kuberl.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "kuberl.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kuberl.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kuberl
{{- end }}

{{- define "kuberl.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kuberl.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kuberl.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The operator's PolicyRules, generated from operator/kuberl_operator/rbac.py. With
`namespaced=true` the rules on cluster-scoped resources are left out: a Role cannot grant them,
and kopf runs without them when it watches named namespaces.
Call with (dict "root" $ "namespaced" bool); returns a YAML list.
*/}}
{{- define "kuberl.operatorRules" -}}
{{- $generated := .root.Files.Get "files/operator-rules.yaml" | fromYaml }}
{{- if not $generated.rules }}
{{- fail "files/operator-rules.yaml is missing or empty: regenerate it with `make crds`" }}
{{- end }}
{{- $rules := list }}
{{- range $entry := $generated.rules }}
{{- if not (and $.namespaced $entry.clusterScoped) }}
{{- $rules = append $rules $entry.rule }}
{{- end }}
{{- end }}
{{- toYaml $rules }}
{{- end }}

