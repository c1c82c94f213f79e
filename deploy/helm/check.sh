#!/usr/bin/env bash
# make helm-check: the chart lints strictly, renders over a matrix of values
# files, every rendered manifest decodes strictly against the Kubernetes API
# types with hardened pods, each value shows in the render where it should
# (query.mjs), the `helm test` pod passes and fails when it should
# (testpod.mjs), the chart README lists every value (readme-values.mjs), and
# the values schema refuses what it must. deploy/README.md has the list.
#
# usage: deploy/helm/check.sh HELM K8SCHECK  (needs node and node_modules)
# Each check prints one line; the first failure stops the script (exit 1).
set -euo pipefail
HELM=${1:?helm binary}
K8SCHECK=${2:?k8scheck binary}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CHART=$HERE/queen-ingress
# Render for a current cluster (a helm built without release ldflags defaults to 1.20).
KUBE_VERSION=1.33.0
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
checks=0
ok() { checks=$((checks + 1)); echo "ok   $*"; }
die() { echo "FAIL $*" >&2; exit 1; }
# q FILE KIND[/NAME] EXPR: what EXPR returns for that rendered object, as JSON (query.mjs).
q() { node "$HERE/query.mjs" "$@" || die "query.mjs $*"; }
# expect WHAT GOT WANT
expect() { [ "$2" = "$3" ] || die "$1: got $2, want $3"; }
render() { "$HELM" template qi "$CHART" --kube-version "$KUBE_VERSION" "$@"; }

# 1. lint --strict (warnings are errors) with the defaults and each matrix file.
"$HELM" lint --strict "$CHART" >"$OUT/lint.txt" 2>&1 || { cat "$OUT/lint.txt"; die "helm lint --strict (defaults)"; }
ok "helm lint --strict (defaults)"
matrix=("$CHART"/ci/*-values.yaml)
for f in "${matrix[@]}"; do
  "$HELM" lint --strict "$CHART" -f "$f" >"$OUT/lint.txt" 2>&1 || { cat "$OUT/lint.txt"; die "helm lint --strict -f ${f#"$ROOT"/}"; }
  ok "helm lint --strict -f ${f#"$ROOT"/}"
done

# 2. render each and decode strictly; every pod template must be hardened.
for f in "${matrix[@]}"; do
  name=$(basename "$f" -values.yaml)
  "$HELM" template qi "$CHART" --kube-version "$KUBE_VERSION" -f "$f" >"$OUT/$name.yaml" 2>"$OUT/err.txt" || { cat "$OUT/err.txt"; die "helm template -f ${f#"$ROOT"/}"; }
  "$K8SCHECK" -hardened "$OUT/$name.yaml" >"$OUT/check.txt" 2>&1 || { cat "$OUT/check.txt"; die "k8scheck -hardened ($name)"; }
  ok "k8scheck -hardened ($name): $(cat "$OUT/check.txt")"
done

# What the full matrix must contain, so a template that silently renders
# nothing cannot pass step 2.
for kind in Deployment Service ServiceAccount PodDisruptionBudget Pod; do
  grep -q "^kind: $kind$" "$OUT/default.yaml" || die "default render has no $kind"
done
for kind in ServiceMonitor PrometheusRule HorizontalPodAutoscaler NetworkPolicy; do
  grep -q "^kind: $kind$" "$OUT/full.yaml" || die "full render has no $kind"
done
grep -q '^kind: PodDisruptionBudget$' "$OUT/explicit-memory.yaml" && die "podDisruptionBudget.enabled=false still renders a PDB"
grep -q '^  replicas:' "$OUT/full.yaml" && die "with autoscaling on, the Deployment must leave replicas to the HPA"
grep -q 'image: "registry.example.com/queen-ingress:0.1.0@sha256:0123456789abcdef' "$OUT/full.yaml" || die "digest is not appended to the image"
ok "rendered kinds, HPA owns replicas, image pinned by digest"

# 3. the memory limit: derived from dedup.cacheMb + memory.headroomMb unless set.
grep -q 'memory: "1536Mi"' "$OUT/default.yaml" || die "default memory limit is not 512 + 1024 = 1536Mi"
"$HELM" template qi "$CHART" --kube-version "$KUBE_VERSION" --set dedup.cacheMb=4096 --set memory.headroomMb=768 >"$OUT/mem.yaml"
grep -q 'memory: "4864Mi"' "$OUT/mem.yaml" || die "memory limit is not derived from dedup.cacheMb=4096 + 768"
grep -q 'memory: "4Gi"' "$OUT/explicit-memory.yaml" || die "an explicit memory limit is not used as given"
"$HELM" template qi "$CHART" --kube-version "$KUBE_VERSION" --set workers=3 >"$OUT/workers.yaml"
grep -q 'memory: "2048Mi"' "$OUT/workers.yaml" || die "memory limit is not 512 + 1024 + 2 x 256 = 2048Mi with 3 workers"
grep -q '{ name: QUEEN_WORKERS, value: "3" }' "$OUT/workers.yaml" || die "workers=3 does not reach QUEEN_WORKERS"
grep -q '{ name: QUEEN_WORKERS, value: "1" }' "$OUT/default.yaml" || die "the default does not pin QUEEN_WORKERS=1"
ok "memory limit derived (1536Mi, 4864Mi, 2048Mi with 3 workers) or explicit (4Gi); workers reach QUEEN_WORKERS"

# 4. the PrometheusRule carries the alert rules of observability/ unchanged.
obs_rules=$(ls "$ROOT"/observability/alerts.yml "$ROOT"/observability/alerts.yaml "$ROOT"/observability/*/alerts.yml 2>/dev/null | head -1 || true)
if [ -n "$obs_rules" ]; then
  cmp -s "$obs_rules" "$CHART/files/alerts.yml" || die "$CHART/files/alerts.yml differs from ${obs_rules#"$ROOT"/}: copy it"
  ok "chart files/alerts.yml is identical to ${obs_rules#"$ROOT"/}"
else
  echo "note observability/ has no alerts.yml yet: the chart carries its own rules (files/alerts.yml)"
fi
# The operator would name the job after the Service (qi-queen-ingress here); the
# ServiceMonitor relabels it to the job the rules select (their promtool tests
# cover both names), under any release name or override.
sm_job='o => o.spec.endpoints.map((e) => (e.relabelings ?? []).filter((r) => r.targetLabel === "job").map((r) => [r.action, r.replacement, r.sourceLabels ?? null]))'
expect "ServiceMonitor job relabeling" "$(q "$OUT/full.yaml" ServiceMonitor "$sm_job")" '[[["replace","queen-ingress",null]]]'
render -f "$CHART/ci/full-values.yaml" --set fullnameOverride=queen >"$OUT/sm-fullname.yaml"
expect "ServiceMonitor job relabeling (fullnameOverride)" "$(q "$OUT/sm-fullname.yaml" ServiceMonitor "$sm_job")" '[[["replace","queen-ingress",null]]]'
ok "ServiceMonitor relabels job to queen-ingress (the rules' job), also under fullnameOverride"

# 5. trace sampling and log level reach the service's env (OTEL_TRACES_SAMPLER_ARG
# as the plain decimal src/config.ts parses: Go would print 1e-05).
env_of='o => Object.fromEntries(o.spec.template.spec.containers[0].env.filter((e) => "value" in e).map((e) => [e.name, e.value]))'
for case in "default 0.01 info" "full 1 debug" "scheduling 0.00001 warn"; do
  set -- $case
  got=$(q "$OUT/$1.yaml" Deployment "o => { const e = ($env_of)(o); return [e.OTEL_TRACES_SAMPLER_ARG, e.QUEEN_LOG_LEVEL]; }")
  expect "sampler ratio and log level ($1)" "$got" "[\"$2\",\"$3\"]"
done
# extraEnv set QUEEN_LOG_LEVEL before logLevel existed: such an entry still wins, and no name appears twice.
render -f "$CHART/ci/default-values.yaml" --set 'extraEnv[0].name=QUEEN_LOG_LEVEL' --set 'extraEnv[0].value=error' >"$OUT/env-compat.yaml"
expect "extraEnv's QUEEN_LOG_LEVEL wins, without a duplicate" \
  "$(q "$OUT/env-compat.yaml" Deployment 'o => { const env = o.spec.template.spec.containers[0].env; return [env.filter((e) => e.name === "QUEEN_LOG_LEVEL").map((e) => e.value), new Set(env.map((e) => e.name)).size === env.length]; }')" \
  '[["error"],true]'
ok "otel.samplerRatio -> OTEL_TRACES_SAMPLER_ARG (0.01 default, 1, 0.00001), logLevel -> QUEEN_LOG_LEVEL (an extraEnv entry wins)"

# 6. names: nameOverride renames every object and the name label; fullnameOverride is used as given.
names='(o, all) => [...new Set(all.map((d) => d.metadata.name))]'
expect "object names with nameOverride=ingest" "$(q "$OUT/scheduling.yaml" Deployment "$names")" '["qi-ingest"]'
expect "name labels with nameOverride=ingest" \
  "$(q "$OUT/scheduling.yaml" Deployment '(o, all) => [...new Set(all.map((d) => d.metadata.labels["app.kubernetes.io/name"]))]')" '["ingest"]'
sel=$(q "$OUT/scheduling.yaml" Deployment 'o => o.spec.selector.matchLabels')
expect "Deployment selector with nameOverride" "$sel" '{"app.kubernetes.io/name":"ingest","app.kubernetes.io/instance":"qi"}'
expect "Service selector with nameOverride" "$(q "$OUT/scheduling.yaml" Service 'o => o.spec.selector')" "$sel"
expect "pod labels carry the selector" "$(q "$OUT/scheduling.yaml" Deployment 'o => Object.entries(o.spec.selector.matchLabels).every(([k, v]) => o.spec.template.metadata.labels[k] === v)')" true
render -f "$CHART/ci/default-values.yaml" --set fullnameOverride=queen >"$OUT/fullname.yaml"
expect "object names with fullnameOverride=queen" "$(q "$OUT/fullname.yaml" Deployment "$names")" '["queen","queen-test-ready"]'
expect "service account, OTEL_SERVICE_NAME and test URL with fullnameOverride" \
  "$(q "$OUT/fullname.yaml" Deployment "(o, all) => [o.spec.template.spec.serviceAccountName, ($env_of)(o).OTEL_SERVICE_NAME, all.find((d) => d.kind === 'Pod').spec.containers[0].env[0].value]")" \
  '["queen","queen","http://queen:6632/health/ready"]'
ok "nameOverride (qi-ingest, name label and selectors), fullnameOverride (queen everywhere)"

# 7. topology spread, affinity, node selector: an entry without labelSelector gets the release's selector.
# "pods" where an entry's selector is exactly the Deployment's.
spread='o => { const sel = o.spec.selector.matchLabels, same = (m) => Object.keys(m).length === Object.keys(sel).length && Object.entries(sel).every(([k, v]) => m[k] === v);
  return (o.spec.template.spec.topologySpreadConstraints ?? []).map((c) => [c.topologyKey, same(c.labelSelector.matchLabels) ? "pods" : c.labelSelector.matchLabels]); }'
expect "topologySpreadConstraints' selectors" "$(q "$OUT/scheduling.yaml" Deployment "$spread")" \
  '[["topology.kubernetes.io/zone","pods"],["kubernetes.io/hostname",{"app.kubernetes.io/instance":"qi"}]]'
expect "affinity and nodeSelector" \
  "$(q "$OUT/scheduling.yaml" Deployment 'o => [Object.keys(o.spec.template.spec.affinity), o.spec.template.spec.nodeSelector]')" \
  '[["podAntiAffinity"],{"kubernetes.io/os":"linux"}]'
expect "no spread constraints by default" "$(q "$OUT/default.yaml" Deployment "$spread")" '[]'
ok "topologySpreadConstraints (selector filled in, or kept), affinity, nodeSelector"

# 8. a PostgreSQL CA from a Secret, mounted read-only, named by an env; envFrom sources.
ca_mount='o => { const s = o.spec.template.spec, c = s.containers[0];
  const v = s.volumes.find((x) => x.name === "postgres-ca"), m = c.volumeMounts.find((x) => x.name === "postgres-ca");
  const e = c.env.find((x) => x.name === "NODE_EXTRA_CA_CERTS");
  return [v.secret.secretName, v.secret.items, m.mountPath, m.readOnly, e.value.startsWith(m.mountPath + "/"), c.envFrom]; }'
expect "CA volume, mount and env; envFrom" "$(q "$OUT/postgres-ca.yaml" Deployment "$ca_mount")" \
  '["postgres-ca",[{"key":"ca.crt","path":"ca.crt"}],"/etc/queen-ingress/postgres-ca",true,true,[{"configMapRef":{"name":"queen-tuning"}},{"prefix":"EXTRA_","secretRef":{"name":"queen-extra","optional":true}}]]'
# The other way the chart README documents: sslrootcert in the Secret's DATABASE_URL.
# node-postgres (the service's driver) must then trust exactly that file.
printf -- '-----BEGIN CERTIFICATE-----\nMIIBcheck\n-----END CERTIFICATE-----\n' >"$OUT/ca.crt"
(cd "$ROOT" && node -e '
  const pg = require("pg"); const fs = require("fs");
  const ssl = new pg.Client({ connectionString: process.argv[1] }).connectionParameters.ssl;
  process.exit(ssl && ssl.ca === fs.readFileSync(process.argv[2], "utf8") && ssl.rejectUnauthorized !== false ? 0 : 1);
' "postgres://queen@db:5432/queen?sslmode=verify-full&sslrootcert=$OUT/ca.crt" "$OUT/ca.crt") || die "node-postgres does not read sslrootcert from DATABASE_URL"
expect "no extra volumes by default" "$(q "$OUT/default.yaml" Deployment 'o => [o.spec.template.spec.volumes.map((v) => v.name), o.spec.template.spec.containers[0].envFrom ?? null]')" '[["tmp"],null]'
ok "CA mount (Secret volume, read-only mount, NODE_EXTRA_CA_CERTS; pg reads sslrootcert), envFrom"

# 9. the NetworkPolicy: off by default; when on, HTTP in only from the peers
# (and the test pod), out only to DNS, PostgreSQL, the brokers' and OTLP ports.
grep -q '^kind: NetworkPolicy$' "$OUT/default.yaml" && die "networkPolicy is off by default, yet rendered"
np=$OUT/network-policy.yaml
expect "NetworkPolicy podSelector" "$(q "$np" NetworkPolicy 'o => o.spec.podSelector.matchLabels')" "$(q "$np" Deployment 'o => o.spec.selector.matchLabels')"
expect "NetworkPolicy ingress" "$(q "$np" NetworkPolicy 'o => [o.spec.policyTypes, o.spec.ingress.length, o.spec.ingress[0].ports, o.spec.ingress[0].from.length]')" \
  '[["Ingress","Egress"],1,[{"port":"http","protocol":"TCP"}],3]'
expect "the test pod is admitted" "$(q "$np" NetworkPolicy '(o, all) => { const pod = all.find((d) => d.kind === "Pod");
  return o.spec.ingress[0].from.some((p) => p.podSelector && !p.namespaceSelector && Object.entries(p.podSelector.matchLabels).every(([k, v]) => pod.metadata.labels[k] === v)); }')" true
egress='o => o.spec.egress.map((r) => [r.ports.map((p) => p.protocol + "/" + p.port).join(","), (r.to ?? []).length])'
expect "NetworkPolicy egress (named peers)" "$(q "$np" NetworkPolicy "$egress")" \
  '[["UDP/53,TCP/53",1],["TCP/5432,TCP/6432",1],["TCP/9092,TCP/9093",1],["TCP/4318",0],["TCP/80",1]]'
expect "NetworkPolicy with default peers (full)" "$(q "$OUT/full.yaml" NetworkPolicy "o => [o.spec.ingress[0].from ?? null, ($egress)(o)]")" \
  '[null,[["UDP/53,TCP/53",0],["TCP/5432",0],["TCP/9092",0],["TCP/4318",0]]]'
render -f "$CHART/ci/default-values.yaml" --set networkPolicy.enabled=true --set otel.endpoint=https://otel.example.com >"$OUT/np-https.yaml"
expect "OTLP port from an https endpoint without port" "$(q "$OUT/np-https.yaml" NetworkPolicy "$egress")" \
  '[["UDP/53,TCP/53",0],["TCP/5432",0],["TCP/9092",0],["TCP/443",0]]'
render -f "$CHART/ci/default-values.yaml" --set networkPolicy.enabled=true --set networkPolicy.egress.dns.enabled=false >"$OUT/np-min.yaml"
expect "no DNS and no OTLP rule" "$(q "$OUT/np-min.yaml" NetworkPolicy "$egress")" '[["TCP/5432",0],["TCP/9092",0]]'
ok "NetworkPolicy: off by default; peers, test pod, DNS/PostgreSQL/Kafka (derived 9092,9093)/OTLP (4318, 443) egress"

# 10. record handling and the Schema Registry reach the service's env; the
# registry's password is a mounted Secret key (never an env value), its CA a
# mounted file, and its URLs' ports an egress rule of their own.
env_of='(names) => (o) => { const e = o.spec.template.spec.containers[0].env; return names.map((n) => { const x = e.find((y) => y.name === n); return x ? (x.value ?? x.valueFrom) : null; }); }'
rec_env='["QUEEN_INGRESS_MISSING_ID","QUEEN_INGRESS_ERRORS_TOLERANCE","QUEEN_INGRESS_DLQ_ERRORS_TOLERANCE","QUEEN_DLQ_SUFFIX","QUEEN_INGRESS_MAPPING","QUEEN_KAFKA_CONSUMER"]'
sr_env='["QUEEN_SCHEMA_REGISTRY_URL","QUEEN_SCHEMA_REGISTRY_TIMEOUT_MS","QUEEN_SCHEMA_REGISTRY_USER","QUEEN_SCHEMA_REGISTRY_PASSWORD_FILE","QUEEN_SCHEMA_REGISTRY_CA_FILE"]'
expect "record handling env (defaults)" "$(q "$OUT/default.yaml" Deployment "($env_of)($rec_env)")" '["dlq","all","none",".dlq",null,null]'
expect "no registry env by default" "$(q "$OUT/default.yaml" Deployment "($env_of)($sr_env)")" '[null,null,null,null,null]'
sr=$OUT/schema-registry.yaml
expect "record handling env (set)" "$(q "$sr" Deployment "($env_of)($rec_env)")" \
  '["offset","none","all","-dead","{\"orders\":{\"partition\":\"json:/customerId\",\"transactionId\":[\"header:eventId\",\"json:/id\"]},\"payments\":{\"missingId\":\"fail\",\"transactionId\":\"key\"}}","{\"maxBytesPerPartition\":2097152,\"rackId\":\"eu-west-1a\"}"]'
expect "registry env" "$(q "$sr" Deployment "($env_of)($sr_env)")" \
  '["https://sr-a.registry.svc:8081, https://sr-b.registry.svc","2000","queen-reader","/etc/queen-ingress/schema-registry/password","/etc/queen-ingress/schema-registry-ca/ca.crt"]'
sr_files='o => { const s = o.spec.template.spec, c = s.containers[0], e = Object.fromEntries(c.env.map((x) => [x.name, x.value]));
  return ["schema-registry", "schema-registry-ca"].map((n) => { const v = s.volumes.find((x) => x.name === n), m = c.volumeMounts.find((x) => x.name === n);
    const f = n === "schema-registry" ? e.QUEEN_SCHEMA_REGISTRY_PASSWORD_FILE : e.QUEEN_SCHEMA_REGISTRY_CA_FILE;
    return [v.secret.secretName, v.secret.items, m.readOnly, f === m.mountPath + "/" + v.secret.items[0].path]; }); }'
expect "registry password and CA are mounted Secret keys the env names" "$(q "$sr" Deployment "$sr_files")" \
  '[["queen-ingress",[{"key":"SR_PASSWORD","path":"password"}],true,true],["registry-ca",[{"key":"ca.crt","path":"ca.crt"}],true,true]]'
grep -q 'secret' <<<"$(q "$sr" Deployment "($env_of)($sr_env)")" && die "a registry secret reached an env value"
expect "registry egress (8081 given, 443 by scheme; named peers)" "$(q "$sr" NetworkPolicy "o => ($egress)(o).at(-1)")" '["TCP/8081,TCP/443",1]'
render -f "$CHART/ci/default-values.yaml" --set schemaRegistry.url=http://sr:8081 >"$OUT/sr-noauth.yaml"
expect "a registry without auth or CA: URL and timeout only, no mounts" "$(q "$OUT/sr-noauth.yaml" Deployment "o => [($env_of)($sr_env)(o), o.spec.template.spec.volumes.map((v) => v.name)]")" \
  '[["http://sr:8081","5000",null,null,null],["tmp"]]'
ok "record handling (missingId, tolerances, DLQ suffix, mapping and consumer as JSON) and Schema Registry (URLs, timeout, user, password and CA as mounted files, egress 8081/443)"

# 11. helm test: a hardened pod (k8scheck above counted it) in the same image
# asks the Service's readiness path; it passes on 200 and fails otherwise.
test_pod='(o, all) => { const d = all.find((x) => x.kind === "Deployment"), s = all.find((x) => x.kind === "Service"), c = o.spec.containers[0];
  const sel = s.spec.selector;
  return [o.metadata.annotations["helm.sh/hook"], c.image === d.spec.template.spec.containers[0].image,
    JSON.stringify(c.securityContext) === JSON.stringify(d.spec.template.spec.containers[0].securityContext),
    Object.entries(sel).every(([k, v]) => o.metadata.labels[k] === v),
    c.env[0].value === "http://" + s.metadata.name + ":" + s.spec.ports[0].port + d.spec.template.spec.containers[0].readinessProbe.httpGet.path]; }'
for r in default full; do
  expect "helm test pod ($r): hook, same image, same securityContext, outside the Service, URL" "$(q "$OUT/$r.yaml" Pod "$test_pod")" '["test",true,true,false,true]'
done
grep -q '^kind: Pod$' "$OUT/scheduling.yaml" && die "tests.enabled=false still renders the test pod"
for answer in "200 0" "503 1" "closed 1"; do
  set -- $answer
  got=$(cd "$ROOT" && node "$HERE/testpod.mjs" "$OUT/default.yaml" "$1" 2>/dev/null | tail -1)
  want="{\"exit\":$2,\"path\":$([ "$1" = closed ] && echo null || echo '"/health/ready"')}"
  expect "the test pod's command when the Service answers $1" "$got" "$want"
done
ok "helm test pod: hook, image, hardening, not selected by the Service; exits 0 on 200, 1 on 503 or no answer"

# 12. NOTES.txt (helm template leaves it out: render it through a copy that wraps it in a ConfigMap).
cp -r "$CHART" "$OUT/notes-chart"
{ echo '{{- define "notes.txt" -}}'; cat "$CHART/templates/NOTES.txt"; echo '{{- end -}}'; } >"$OUT/notes-chart/templates/_notes.tpl"
rm "$OUT/notes-chart/templates/NOTES.txt"
printf '%s\n' 'apiVersion: v1' 'kind: ConfigMap' 'metadata: { name: notes }' 'data: { notes: {{ include "notes.txt" . | toJson }} }' >"$OUT/notes-chart/templates/notes.yaml"
"$HELM" template qi "$OUT/notes-chart" --kube-version "$KUBE_VERSION" -f "$CHART/ci/network-policy-values.yaml" --show-only templates/notes.yaml >"$OUT/notes.yaml"
notes=$(q "$OUT/notes.yaml" ConfigMap 'o => o.data.notes')
for want in 'deployment/qi-queen-ingress' 'helm test -n default qi' 'service/qi-queen-ingress 6632:6632' '0.01 of the traces' 'A NetworkPolicy admits HTTP only from'; do
  case "$notes" in *"$want"*) ;; *) die "NOTES.txt lacks '$want': $notes" ;; esac
done
ok "NOTES.txt renders the rollout, helm test, port-forward, sampling and NetworkPolicy lines"

# 13. the chart README lists every value of values.yaml, and only those.
(cd "$ROOT" && node "$HERE/readme-values.mjs" "$CHART/values.yaml" "$CHART/README.md") >"$OUT/readme.txt" 2>&1 || { cat "$OUT/readme.txt"; die "chart README.md and values.yaml disagree"; }
ok "chart README.md: $(cat "$OUT/readme.txt")"

# 14. the schema refuses bad values at lint time, naming the field.
for f in "$HERE"/tests/bad-*.yaml; do
  expect=$(sed -n 's/^# expect: //p' "$f")
  [ -n "$expect" ] || die "${f#"$ROOT"/} has no '# expect:' line"
  if "$HELM" lint --strict "$CHART" -f "$f" >"$OUT/bad.txt" 2>&1; then
    cat "$OUT/bad.txt"; die "helm lint accepted ${f#"$ROOT"/}"
  fi
  grep -qF "[ERROR] values.yaml: - $expect" "$OUT/bad.txt" || { cat "$OUT/bad.txt"; die "${f#"$ROOT"/}: lint did not fail on the schema with '$expect'"; }
  # The same values are refused at install time too (template runs the same validation).
  if "$HELM" template qi "$CHART" --kube-version "$KUBE_VERSION" -f "$f" >"$OUT/bad.txt" 2>&1; then die "helm template accepted ${f#"$ROOT"/}"; fi
  grep -qF "values don't meet the specifications of the schema" "$OUT/bad.txt" && grep -qF -- "- $expect" "$OUT/bad.txt" || { cat "$OUT/bad.txt"; die "${f#"$ROOT"/}: template did not fail on the schema with '$expect'"; }
  ok "schema rejects ${f#"$ROOT"/} at lint and template ($expect)"
done

# 15. k8scheck itself fails on what it must catch (mutations of a good render).
sed 's/readOnlyRootFilesystem: true/readOnlyRootFileSystem: true/' "$OUT/default.yaml" >"$OUT/typo.yaml"
if "$K8SCHECK" "$OUT/typo.yaml" >"$OUT/m.txt" 2>&1; then die "k8scheck accepted an unknown field"; fi
grep -q 'unknown field' "$OUT/m.txt" || { cat "$OUT/m.txt"; die "k8scheck failed without naming the unknown field"; }
sed 's/runAsNonRoot: true/runAsNonRoot: false/' "$OUT/default.yaml" >"$OUT/root.yaml"
if "$K8SCHECK" -hardened "$OUT/root.yaml" >"$OUT/m.txt" 2>&1; then die "k8scheck -hardened accepted runAsNonRoot: false"; fi
grep -q 'runAsNonRoot is not true' "$OUT/m.txt" || { cat "$OUT/m.txt"; die "k8scheck failed without naming runAsNonRoot"; }
sed 's/^  policyTypes:/  policyTypess:/' "$OUT/network-policy.yaml" >"$OUT/np-typo.yaml"
if "$K8SCHECK" "$OUT/np-typo.yaml" >"$OUT/m.txt" 2>&1; then die "k8scheck accepted an unknown NetworkPolicy field"; fi
grep -q 'unknown field "spec.policyTypess"' "$OUT/m.txt" || { cat "$OUT/m.txt"; die "k8scheck did not decode the NetworkPolicy strictly"; }
sed 's/readOnlyRootFilesystem: true/readOnlyRootFilesystem: false/' "$OUT/default.yaml" >"$OUT/rw.yaml"
if "$K8SCHECK" -hardened "$OUT/rw.yaml" >"$OUT/m.txt" 2>&1; then die "k8scheck -hardened accepted readOnlyRootFilesystem: false"; fi
grep -q 'readOnlyRootFilesystem is not true' "$OUT/m.txt" || { cat "$OUT/m.txt"; die "k8scheck failed without naming readOnlyRootFilesystem"; }
sed 's/^kind: Service$/kind: Servce/' "$OUT/default.yaml" >"$OUT/kind.yaml"
if "$K8SCHECK" "$OUT/kind.yaml" >"$OUT/m.txt" 2>&1; then die "k8scheck accepted an unknown kind"; fi
ok "k8scheck rejects an unknown field (also in a NetworkPolicy), runAsNonRoot: false, a writable root filesystem, an unknown kind"

echo "helm-check: $checks checks passed"
