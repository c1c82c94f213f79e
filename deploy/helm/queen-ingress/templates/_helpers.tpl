{{- define "queen-ingress.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "queen-ingress.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{- define "queen-ingress.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* repository:tag, or repository:tag@digest when a digest pins the exact image. */}}
{{- define "queen-ingress.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- $ref = printf "%s@%s" $ref .Values.image.digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/*
The container memory limit. "auto" derives it from the dedup cache budget
(QUEEN_DEDUP_CACHE_MB) plus headroom for the Node heap, fusion buffers
(QUEEN_MAX_INFLIGHT_BYTES) and the PostgreSQL/Kafka clients; an explicit
quantity is used as given.
*/}}
{{- define "queen-ingress.memoryLimit" -}}
{{- $limit := .Values.resources.limits.memory | toString -}}
{{- if eq $limit "auto" -}}
{{- printf "%dMi" (add (int .Values.dedup.cacheMb) (int .Values.memory.headroomMb)) -}}
{{- else -}}
{{- $limit -}}
{{- end -}}
{{- end -}}

{{/* Seconds the pod may take to stop: preStop pause + the service's own shutdown limit + margin. */}}
{{- define "queen-ingress.gracePeriod" -}}
{{- add (int .Values.lifecycle.preStopSleepSeconds) (div (add (int .Values.shutdownTimeoutMs) 999) 1000) 10 -}}
{{- end -}}

{{- define "queen-ingress.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "queen-ingress.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}
