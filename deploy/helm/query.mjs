// Structured assertions for check.sh: grep cannot tell which document or
// list entry a line belongs to. Prints, as JSON, what EXPR returns for the
// first document of KIND (and NAME, when given) in a rendered manifest; EXPR
// also gets every document, to compare objects with each other.
//
//   node deploy/helm/query.mjs FILE KIND[/NAME] 'o => o.spec.replicas'
//   node deploy/helm/query.mjs FILE Service '(o, all) => all.map((d) => d.metadata.name)'
//
// Exit 1 when no such document exists (so a template that renders nothing
// cannot pass), 2 on usage errors.
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

const [file, selector, expr] = process.argv.slice(2);
if (!file || !selector || !expr) {
  console.error('usage: query.mjs FILE KIND[/NAME] EXPR');
  process.exit(2);
}
const [kind, name] = selector.split('/');
const docs = parseAllDocuments(readFileSync(file, 'utf8'))
  .map((d) => d.toJS())
  .filter((o) => o !== null);
const doc = docs.find((o) => o?.kind === kind && (name === undefined || o.metadata?.name === name));
if (!doc) {
  console.error(`${file}: no ${selector}`);
  process.exit(1);
}
// The expression is check.sh's own code, never input from a values file.
const fn = new Function(`return (${expr});`)();
console.log(JSON.stringify(fn(doc, docs)));
