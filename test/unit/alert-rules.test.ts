import { readFile } from 'node:fs/promises';
import test from 'ava';
import { parse as parseYaml } from 'yaml';

/**
 * What promtool does not check about the alert rules (`make
 * check-observability` runs promtool itself): the chart ships the same file,
 * every rule links to its own section of docs/runbooks.md, every alert has
 * promtool cases that fire and that stay quiet, among them three replicas as
 * the chart's ServiceMonitor scrapes them, and nothing reads the lag gauge's
 * deprecated name.
 */

const ROOT = new URL('../../../', import.meta.url);
const read = (p: string) => readFile(new URL(p, ROOT), 'utf8');

const RULES = 'observability/prometheus/alerts.yml';
const CHART_RULES = 'deploy/helm/queen-ingress/files/alerts.yml';
const RULE_TESTS = 'observability/prometheus/alerts.test.yml';
const RUNBOOKS = 'docs/runbooks.md';
const RUNBOOK_BASE = 'https://github.com/queen-ingress/queen-ingress/blob/main/docs/runbooks.md';

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleFile {
  groups: { name: string; rules: Rule[] }[];
}
interface AlertCase {
  eval_time: string;
  alertname: string;
  exp_alerts?: { exp_labels?: Record<string, string>; exp_annotations?: Record<string, string> }[];
}
interface TestFile {
  rule_files: string[];
  tests: { input_series: { series: string; values: string }[]; alert_rule_test?: AlertCase[] }[];
}

const alerts = async (): Promise<Rule[]> =>
  (parseYaml(await read(RULES)) as RuleFile).groups.flatMap((g) => g.rules).filter((r) => r.alert !== undefined);

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to dashes. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');

test('the chart carries the same rule file, byte for byte', async (t) => {
  t.is(await read(CHART_RULES), await read(RULES));
});

test('every alert has a severity, a summary, a description and a runbook_url to its own section of docs/runbooks.md', async (t) => {
  const rules = await alerts();
  t.true(rules.length >= 13, `alerts: ${rules.map((r) => r.alert).join(', ')}`);
  const sections = [...(await read(RUNBOOKS)).matchAll(/^## (.+)$/gm)].map((m) => m[1]!);
  for (const r of rules) {
    t.true(['warning', 'critical'].includes(r.labels?.severity ?? ''), `${r.alert}: severity`);
    t.truthy(r.annotations?.summary, `${r.alert}: summary`);
    t.truthy(r.annotations?.description, `${r.alert}: description`);
    t.is(r.annotations?.runbook_url, `${RUNBOOK_BASE}#${anchor(r.alert!)}`, `${r.alert}: runbook_url`);
    t.true(sections.includes(r.alert!), `docs/runbooks.md has a section "## ${r.alert}"`);
  }
  // No section for an alert that does not exist (renamed or removed).
  t.deepEqual(
    sections.filter((s) => !rules.some((r) => r.alert === s)),
    [],
  );
  const names = rules.map((r) => r.alert);
  t.is(new Set(names).size, names.length, 'alert names are unique');
});

test('every alert has promtool cases that fire and that stay quiet, some with three replicas as the chart scrapes them', async (t) => {
  const file = parseYaml(await read(RULE_TESTS)) as TestFile;
  t.deepEqual(file.rule_files, ['alerts.yml']);
  for (const rule of await alerts()) {
    const groups = file.tests.filter((g) => (g.alert_rule_test ?? []).some((c) => c.alertname === rule.alert));
    const cases = groups.flatMap((g) => (g.alert_rule_test ?? []).filter((c) => c.alertname === rule.alert));
    t.true(
      cases.some((c) => (c.exp_alerts ?? []).length > 0),
      `${rule.alert}: a case where it fires`,
    );
    t.true(
      cases.some((c) => (c.exp_alerts ?? []).length === 0),
      `${rule.alert}: a case where it stays quiet`,
    );
    // Three replicas of one deployment, labelled as the Prometheus operator labels them.
    const replicated = groups.some((g) => {
      const pods = new Map<string, Set<string>>();
      for (const s of g.input_series) {
        const ns = /\bnamespace="([^"]+)"/.exec(s.series)?.[1];
        const pod = /\bpod="([^"]+)"/.exec(s.series)?.[1];
        if (ns && pod && /\bservice="/.test(s.series)) pods.set(ns, (pods.get(ns) ?? new Set()).add(pod));
      }
      return [...pods.values()].some((p) => p.size >= 3);
    });
    t.true(replicated, `${rule.alert}: a test group with three replicas (namespace, service, pod labels)`);
    // The operator's default job name (<release>-queen-ingress), which the chart relabels away.
    t.true(
      cases.some((c) => (c.exp_alerts ?? []).some((a) => a.exp_labels?.job === 'qi-queen-ingress')),
      `${rule.alert}: fires with job="qi-queen-ingress" too`,
    );
  }
});

test('no rule and no dashboard query reads the deprecated queen_kafka_consumer_lag', async (t) => {
  const deprecated = /\bqueen_kafka_consumer_lag\b(?!_)/;
  for (const r of await alerts()) t.false(deprecated.test(r.expr), `${r.alert}: ${r.expr}`);
  const dashboard = JSON.parse(await read('observability/grafana/queen-ingress.json')) as {
    panels: { title: string; targets?: { expr?: string }[] }[];
  };
  for (const p of dashboard.panels) for (const q of p.targets ?? []) t.false(deprecated.test(q.expr ?? ''), `${p.title}: ${q.expr}`);
  t.regex(JSON.stringify(dashboard), /queen_kafka_consumer_lag_records/);
});
