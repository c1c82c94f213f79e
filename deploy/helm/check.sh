#!/usr/bin/env bash
# make helm-check: the chart lints strictly, renders over a matrix of values
# files, every rendered manifest decodes strictly against the Kubernetes API
# types with hardened pods, and the values schema refuses what it must.
#
# usage: deploy/helm/check.sh HELM K8SCHECK
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
for kind in Deployment Service ServiceAccount PodDisruptionBudget; do
  grep -q "^kind: $kind$" "$OUT/default.yaml" || die "default render has no $kind"
done
for kind in ServiceMonitor PrometheusRule HorizontalPodAutoscaler; do
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
ok "memory limit derived (1536Mi, 4864Mi) or explicit (4Gi)"

# 4. the PrometheusRule carries the alert rules of observability/ unchanged.
obs_rules=$(ls "$ROOT"/observability/alerts.yml "$ROOT"/observability/alerts.yaml "$ROOT"/observability/*/alerts.yml 2>/dev/null | head -1 || true)
if [ -n "$obs_rules" ]; then
  cmp -s "$obs_rules" "$CHART/files/alerts.yml" || die "$CHART/files/alerts.yml differs from ${obs_rules#"$ROOT"/}: copy it"
  ok "chart files/alerts.yml is identical to ${obs_rules#"$ROOT"/}"
else
  echo "note observability/ has no alerts.yml yet: the chart carries its own rules (files/alerts.yml)"
fi

# 5. the schema refuses bad values at lint time, naming the field.
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

# 6. k8scheck itself fails on what it must catch (mutations of a good render).
sed 's/readOnlyRootFilesystem: true/readOnlyRootFileSystem: true/' "$OUT/default.yaml" >"$OUT/typo.yaml"
if "$K8SCHECK" "$OUT/typo.yaml" >"$OUT/m.txt" 2>&1; then die "k8scheck accepted an unknown field"; fi
grep -q 'unknown field' "$OUT/m.txt" || { cat "$OUT/m.txt"; die "k8scheck failed without naming the unknown field"; }
sed 's/runAsNonRoot: true/runAsNonRoot: false/' "$OUT/default.yaml" >"$OUT/root.yaml"
if "$K8SCHECK" -hardened "$OUT/root.yaml" >"$OUT/m.txt" 2>&1; then die "k8scheck -hardened accepted runAsNonRoot: false"; fi
grep -q 'runAsNonRoot is not true' "$OUT/m.txt" || { cat "$OUT/m.txt"; die "k8scheck failed without naming runAsNonRoot"; }
sed 's/readOnlyRootFilesystem: true/readOnlyRootFilesystem: false/' "$OUT/default.yaml" >"$OUT/rw.yaml"
if "$K8SCHECK" -hardened "$OUT/rw.yaml" >"$OUT/m.txt" 2>&1; then die "k8scheck -hardened accepted readOnlyRootFilesystem: false"; fi
grep -q 'readOnlyRootFilesystem is not true' "$OUT/m.txt" || { cat "$OUT/m.txt"; die "k8scheck failed without naming readOnlyRootFilesystem"; }
sed 's/^kind: Service$/kind: Servce/' "$OUT/default.yaml" >"$OUT/kind.yaml"
if "$K8SCHECK" "$OUT/kind.yaml" >"$OUT/m.txt" 2>&1; then die "k8scheck accepted an unknown kind"; fi
ok "k8scheck rejects an unknown field, runAsNonRoot: false, a writable root filesystem, an unknown kind"

echo "helm-check: $checks checks passed"
