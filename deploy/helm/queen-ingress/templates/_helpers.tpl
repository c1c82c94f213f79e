{{/* The app's name: the chart's, or nameOverride (the app.kubernetes.io/name label). */}}
{{- define "queen-ingress.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Every object's name: fullnameOverride as given, else "<release>-<name>".
Unlike the scaffold's helper, a release whose name already contains the chart
name is still prefixed: existing releases keep their object names (and the
ServiceMonitor's job label, which is the Service's name) across an upgrade.
*/}}
{{- define "queen-ingress.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "queen-ingress.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "queen-ingress.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "queen-ingress.labels" -}}
{{ include "queen-ingress.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "queen-ingress.chart" . | quote }}
{{- end -}}

{{/* Selects the service's pods (Deployment, Service, PDB, NetworkPolicy, spread constraints). */}}
{{- define "queen-ingress.selector" -}}
app.kubernetes.io/name: {{ include "queen-ingress.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The `helm test` pod's labels: deliberately NOT the selector above, so the
Service never routes to it and the PDB never counts it; the NetworkPolicy
admits it by these.
*/}}
{{- define "queen-ingress.testSelector" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: helm-test
{{- end -}}

{{/*
The trace sampling ratio as the service parses OTEL_TRACES_SAMPLER_ARG (a
plain decimal between 0 and 1): Go would print 0.00001 as "1e-05".
*/}}
{{- define "queen-ingress.samplerRatio" -}}
{{- regexReplaceAll "\\.?0+$" (printf "%.9f" (float64 .Values.otel.samplerRatio)) "" -}}
{{- end -}}

{{/* The distinct ports of kafka.brokers ("host:port,…"), for the NetworkPolicy's Kafka egress. */}}
{{- define "queen-ingress.kafkaPorts" -}}
{{- $ports := list -}}
{{- range splitList "," .Values.kafka.brokers -}}
{{- $p := regexFind ":[0-9]+$" (trim .) | trimPrefix ":" -}}
{{- if $p -}}{{- $ports = append $ports (atoi $p) -}}{{- end -}}
{{- end -}}
{{- $ports | uniq | toJson -}}
{{- end -}}

{{/* The port of otel.endpoint (explicit, else 80/443 by scheme). */}}
{{- define "queen-ingress.otlpPort" -}}
{{- $u := urlParse .Values.otel.endpoint -}}
{{- $p := regexFind ":[0-9]+$" $u.host | trimPrefix ":" -}}
{{- if $p -}}{{ $p }}{{- else if eq $u.scheme "https" -}}443{{- else -}}80{{- end -}}
{{- end -}}

{{/* The distinct ports of schemaRegistry.url ("url,…"; explicit, else 80/443 by scheme), for its NetworkPolicy egress. */}}
{{- define "queen-ingress.schemaRegistryPorts" -}}
{{- $ports := list -}}
{{- range splitList "," .Values.schemaRegistry.url -}}
{{- $u := urlParse (trim .) -}}
{{- $p := regexFind ":[0-9]+$" $u.host | trimPrefix ":" -}}
{{- $ports = append $ports (ternary (atoi $p) (ternary 443 80 (eq $u.scheme "https")) (ne $p "")) -}}
{{- end -}}
{{- $ports | uniq | toJson -}}
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
(QUEEN_DEDUP_CACHE_MB, split between the workers) plus headroom for the Node
heap, fusion buffers (QUEEN_MAX_INFLIGHT_BYTES) and the PostgreSQL/Kafka
clients, plus memory.perWorkerMb for each worker beyond the first; an
explicit quantity is used as given.
*/}}
{{- define "queen-ingress.memoryLimit" -}}
{{- $limit := .Values.resources.limits.memory | toString -}}
{{- if eq $limit "auto" -}}
{{- printf "%dMi" (add (int .Values.dedup.cacheMb) (int .Values.memory.headroomMb) (mul (sub (int .Values.workers) 1) (int .Values.memory.perWorkerMb))) -}}
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
