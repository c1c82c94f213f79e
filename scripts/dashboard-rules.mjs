#!/usr/bin/env node
// Turns every PromQL query of the Grafana dashboard into a recording rule, so
// `promtool check rules` parses them (Grafana's variables replaced by values
// of the same type); fails on a variable it does not know. Usage:
//   node scripts/dashboard-rules.mjs observability/grafana/queen-ingress.json > rules.yml
import { readFileSync } from 'node:fs';

const file = process.argv[2];
const dash = JSON.parse(readFileSync(file, 'utf8'));
const lines = ['groups:', '  - name: dashboard-queries', '    rules:'];
let n = 0;
for (const panel of dash.panels ?? []) {
  for (const target of panel.targets ?? []) {
    if (!target.expr) continue;
    const expr = target.expr.replaceAll('$__rate_interval', '1m').replaceAll('$__interval', '1m').replaceAll('$job', '.+');
    if (/\$\w/.test(expr)) throw new Error(`${file}: panel "${panel.title}" uses an unknown variable: ${target.expr}`);
    lines.push(`      - record: dashboard:panel${panel.id}:${target.refId}`, `        expr: ${JSON.stringify(expr)}`);
    n++;
  }
}
if (n === 0) throw new Error(`${file}: no queries found`);
process.stdout.write(lines.join('\n') + '\n');
