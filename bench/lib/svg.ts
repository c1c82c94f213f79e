import type { Curve } from './types.js';
import { fmt } from './stats.js';

/**
 * A small hand-written SVG line chart: one polyline with markers per series,
 * linear axes with "nice" ticks starting at 0, a legend. No dependencies.
 */

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Ticks at 1/2/5 x 10^k covering [0, hi]. */
export function niceTicks(hi: number, count = 5): number[] {
  if (!(hi > 0)) return [0, 1];
  const raw = hi / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const ticks: number[] = [];
  for (let v = 0; v <= hi + step * 1e-9; v += step) ticks.push(v);
  if (ticks[ticks.length - 1]! < hi) ticks.push(ticks[ticks.length - 1]! + step);
  return ticks;
}

export function lineChartSvg(c: Curve, width = 720, height = 420): string {
  const m = { l: 78, r: 24, t: 44, b: 58 };
  const pw = width - m.l - m.r;
  const ph = height - m.t - m.b;
  const all = c.series.flatMap((s) => s.points);
  const xt = niceTicks(Math.max(0, ...all.map((p) => p[0])));
  const yt = niceTicks(Math.max(0, ...all.map((p) => p[1])));
  const xMax = xt[xt.length - 1]!;
  const yMax = yt[yt.length - 1]!;
  const X = (v: number): number => m.l + (v / xMax) * pw;
  const Y = (v: number): number => m.t + ph - (v / yMax) * ph;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
  );
  out.push(`<rect width="${width}" height="${height}" fill="#fff"/>`);
  out.push(`<text x="${width / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${esc(c.title)}</text>`);
  for (const v of yt) {
    const y = Y(v).toFixed(1);
    out.push(`<line x1="${m.l}" y1="${y}" x2="${m.l + pw}" y2="${y}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${m.l - 8}" y="${y}" text-anchor="end" dominant-baseline="middle">${esc(fmt(v))}</text>`);
  }
  for (const v of xt) {
    const x = X(v).toFixed(1);
    out.push(`<line x1="${x}" y1="${m.t}" x2="${x}" y2="${m.t + ph}" stroke="#f0f0f0"/>`);
    out.push(`<text x="${x}" y="${m.t + ph + 18}" text-anchor="middle">${esc(fmt(v))}</text>`);
  }
  out.push(`<line x1="${m.l}" y1="${m.t + ph}" x2="${m.l + pw}" y2="${m.t + ph}" stroke="#333"/>`);
  out.push(`<line x1="${m.l}" y1="${m.t}" x2="${m.l}" y2="${m.t + ph}" stroke="#333"/>`);
  out.push(`<text x="${m.l + pw / 2}" y="${height - 14}" text-anchor="middle">${esc(c.xLabel)}</text>`);
  out.push(`<text x="18" y="${m.t + ph / 2}" text-anchor="middle" transform="rotate(-90 18 ${m.t + ph / 2})">${esc(c.yLabel)}</text>`);
  c.series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const pts = [...s.points].sort((a, b) => a[0] - b[0]);
    if (pts.length > 1) {
      out.push(
        `<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map((p) => `${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(' ')}"/>`,
      );
    }
    for (const p of pts)
      out.push(
        `<circle cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}" r="3.5" fill="${color}"><title>${esc(`${s.name}: x=${fmt(p[0])} y=${fmt(p[1])}`)}</title></circle>`,
      );
    const ly = m.t + 8 + i * 18;
    const lx = m.l + pw - 190;
    out.push(`<rect x="${lx}" y="${ly - 6}" width="14" height="3" fill="${color}"/>`);
    out.push(`<text x="${lx + 20}" y="${ly}" dominant-baseline="middle">${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
