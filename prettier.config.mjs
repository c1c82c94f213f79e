// Prettier: options chosen to match the code as it was written, measured by
// the lines `prettier --write` changed over src/, test/ and bench/ before the
// first reformat (printWidth 100: +11392/-3081, 120: +7163/-1907,
// 140: +4672/-1203, 160: +2981/-678). The code writes long lines (p95 of code
// lines 126 chars, comments wrapped at ~80); 140 keeps most of them as they
// are while still fitting a side-by-side review. Single quotes, semicolons
// and trailing commas everywhere are what the code already uses.
/** @type {import('prettier').Config} */
export default {
  printWidth: 140,
  singleQuote: true,
  trailingComma: 'all',
  semi: true,
  arrowParens: 'always',
  overrides: [
    // YAML in this repository (compose, Prometheus, the chart's values)
    // quotes with double quotes: keep that.
    { files: ['*.yaml', '*.yml'], options: { singleQuote: false } },
  ],
};
