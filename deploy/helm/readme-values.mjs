// check.sh's guard on the chart README: its values table (| `key` | type |
// `default` | description |) names every value of values.yaml, names no key
// values.yaml lacks, and shows each default as values.yaml has it (JSON), so
// the table cannot drift from the chart.
//
//   node deploy/helm/readme-values.mjs VALUES_YAML README_MD
//
// A map is documented either as one row (e.g. `resources.requests`) or by a
// row for each of its keys; lists and empty maps are single values.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';

const [valuesFile, readmeFile] = process.argv.slice(2);
if (!valuesFile || !readmeFile) {
  console.error('usage: readme-values.mjs VALUES_YAML README_MD');
  process.exit(2);
}
const values = parse(readFileSync(valuesFile, 'utf8'));
const rows = new Map();
for (const line of readFileSync(readmeFile, 'utf8').split('\n')) {
  const m = /^\| `([A-Za-z0-9_.]+)` \| ([^|]+) \| `([^`]*)` \| (.+) \|$/.exec(line);
  if (m) rows.set(m[1], { type: m[2].trim(), dflt: m[3], text: m[4].trim() });
}

const problems = [];
const isMap = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const leaves = [];
(function walk(v, path) {
  if (path && (rows.has(path) || !isMap(v) || Object.keys(v).length === 0)) {
    leaves.push(path);
    return;
  }
  for (const [k, child] of Object.entries(v)) walk(child, path ? `${path}.${k}` : k);
})(values, '');

for (const path of leaves) {
  const row = rows.get(path);
  if (!row) {
    problems.push(`values.yaml has ${path}, the README's table does not`);
    continue;
  }
  const value = path.split('.').reduce((o, k) => o[k], values);
  if (row.dflt !== JSON.stringify(value)) problems.push(`${path}: README default \`${row.dflt}\`, values.yaml ${JSON.stringify(value)}`);
  if (!row.text) problems.push(`${path}: no description`);
}
for (const path of rows.keys()) {
  if (!leaves.includes(path)) problems.push(`the README's table has ${path}, values.yaml does not (or documents its keys instead)`);
}
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`${leaves.length} values documented with their defaults`);
