{{/* The labels of every object the chart makes. */}}
{{- define "trainjob-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The manager's image: by digest if one is given, else by tag. */}}
{{- define "trainjob-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{- define "trainjob-operator.certManager" -}}
{{- if eq .Values.webhook.certificates "certManager" }}true{{ else if ne .Values.webhook.certificates "builtin" }}{{ fail (printf "webhook.certificates %q: want builtin or certManager" .Values.webhook.certificates) }}{{ end }}
{{- end }}

{{/*
The objects of a file hack/chartgen wrote from config/ (list $ "files/x.yaml"),
in the release's namespace, with the chart's labels; the webhook
configurations get cert-manager's CA injection when it makes the
certificate. (list $ "files/x.yaml" "from" "to") moves the file's objects
from namespace "from" to "to" instead.
*/}}
{{- define "trainjob-operator.fromFile" -}}
{{- $root := index . 0 -}}
{{- $from := "trainjob-system" -}}
{{- $to := $root.Release.Namespace -}}
{{- if gt (len .) 2 }}{{ $from = index . 2 }}{{ $to = index . 3 }}{{ end -}}
{{- $content := $root.Files.Get (index . 1) | replace (printf "namespace: %s" $from) (printf "namespace: %s" $to) -}}
{{- $labels := include "trainjob-operator.labels" $root | fromYaml -}}
{{- range $doc := splitList "\n---\n" $content }}
{{- $obj := fromYaml $doc }}
{{- if $obj.kind }}
{{- $_ := set $obj.metadata "labels" (merge (deepCopy $labels) ($obj.metadata.labels | default dict)) }}
{{- if and (include "trainjob-operator.certManager" $root) (has $obj.kind (list "ValidatingWebhookConfiguration" "MutatingWebhookConfiguration")) }}
{{- $_ := set $obj.metadata "annotations" (merge ($obj.metadata.annotations | default dict) (dict "cert-manager.io/inject-ca-from" (printf "%s/trainjob-operator-webhook" $root.Release.Namespace))) }}
{{- end }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}
