#!/usr/bin/env node
// Renders one trace from Jaeger's query API JSON (GET /api/traces/<id>) as an
// SVG timeline: one row per span, indented by depth, bar = start..end.
//   node scripts/trace-svg.mjs trace.json > docs/images/trace.svg
import { readFileSync } from 'node:fs';

const doc = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const tr = doc.data ? doc.data[0] : doc;
const spans = tr.spans;
const byId = new Map(spans.map((s) => [s.spanID, s]));
const parentOf = (s) => s.references?.find((r) => r.refType === 'CHILD_OF' && byId.has(r.spanID))?.spanID;
const children = new Map();
for (const s of spans) {
  const p = parentOf(s) ?? '';
  if (!children.has(p)) children.set(p, []);
  children.get(p).push(s);
}
const rows = [];
const walk = (id, depth) => {
  for (const s of (children.get(id) ?? []).sort((a, b) => a.startTime - b.startTime)) {
    rows.push({ s, depth });
    walk(s.spanID, depth + 1);
  }
};
walk('', 0);
const t0 = Math.min(...spans.map((s) => s.startTime));
const t1 = Math.max(...spans.map((s) => s.startTime + s.duration));
const W = 1000,
  label = 380,
  rowH = 22,
  top = 40;
const x = (t) => label + ((t - t0) / Math.max(1, t1 - t0)) * (W - label - 20);
const esc = (v) => String(v).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const colors = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#b07aa1'];
const services = Object.keys(tr.processes);
const out = [
  `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${top + rows.length * rowH + 30}" font-family="monospace" font-size="12">`,
  `<rect width="100%" height="100%" fill="white"/>`,
  `<text x="10" y="20" font-size="14">trace ${esc(tr.traceID)} — ${rows.length} spans, ${((t1 - t0) / 1000).toFixed(2)} ms (rendered from Jaeger's /api/traces JSON)</text>`,
];
rows.forEach(({ s, depth }, i) => {
  const y = top + i * rowH;
  const c = colors[services.indexOf(s.processID) % colors.length];
  const svc = tr.processes[s.processID]?.serviceName ?? '';
  out.push(`<text x="${10 + depth * 14}" y="${y + 15}">${esc(s.operationName)}</text>`);
  out.push(
    `<rect x="${x(s.startTime).toFixed(1)}" y="${y + 4}" width="${Math.max(2, x(s.startTime + s.duration) - x(s.startTime)).toFixed(1)}" height="${rowH - 8}" fill="${c}"><title>${esc(svc)}: ${esc(s.operationName)} ${(s.duration / 1000).toFixed(3)} ms</title></rect>`,
  );
  out.push(`<text x="${W - 15}" y="${y + 15}" text-anchor="end" fill="#555">${(s.duration / 1000).toFixed(2)} ms</text>`);
});
out.push(
  `<text x="10" y="${top + rows.length * rowH + 20}" fill="#555">${services.map((p) => esc(tr.processes[p].serviceName)).join(', ')}</text>`,
  '</svg>',
);
process.stdout.write(out.join('\n') + '\n');
