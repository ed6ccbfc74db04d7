{{/* The release's name for its objects: opemu, or <release>-opemu. */}}
{{- define "opemu.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "opemu.labels" -}}
app.kubernetes.io/part-of: opemu
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "opemu.selector" -}}
app.kubernetes.io/name: opemu
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: apiserver
{{- end -}}

{{- define "opemu.etcdSelector" -}}
app.kubernetes.io/name: opemu-etcd
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* ETCD_ENDPOINTS: the in-release members, or etcd.endpoints. */}}
{{- define "opemu.etcdEndpoints" -}}
{{- if .Values.etcd.enabled -}}
{{- $name := printf "%s-etcd" (include "opemu.fullname" .) -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $urls = append $urls (printf "http://%s-%d.%s:2379" $name $i $name) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- required "etcd.endpoints: name your etcd, or set etcd.enabled" .Values.etcd.endpoints | join "," -}}
{{- end -}}
{{- end -}}

{{- define "opemu.tlsSecret" -}}
{{- .Values.tls.existingSecret | default (printf "%s-tls" (include "opemu.fullname" .)) -}}
{{- end -}}

{{- define "opemu.tokensSecret" -}}
{{- .Values.tokens.existingSecret | default (printf "%s-tokens" (include "opemu.fullname" .)) -}}
{{- end -}}
