// @ts-check
// One ESLint config for the repository: typescript-eslint's type-aware strict
// rules over every TypeScript file tsconfig.json compiles (src, test, bench;
// packages/* build subsets of src), plain recommended rules over the .mjs
// scripts, and eslint-config-prettier last so no rule argues with Prettier.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', '.local/**', 'node_modules/**', 'packages/*/dist/**', 'bench/results/**'] },
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
  },
  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.strictTypeChecked, ...tseslint.configs.stylisticTypeChecked],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // `xs[i]!` is this codebase's deliberate mark for an indexed read whose
      // bound the surrounding loop or length check proves (tsconfig has
      // noUncheckedIndexedAccess). A runtime check instead would add a branch
      // to the dedup cache's and frame codec's hot loops for a case that
      // cannot happen; no-unnecessary-type-assertion still flags a `!` that
      // the types make pointless.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Numbers and booleans print the same in a template as through
      // String(); error messages and SQL-free log lines interpolate them
      // everywhere. Objects, nullish values and `any` are still refused.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      // `(err) => reject(err)`, `() => this.stop()`: an arrow that only calls
      // a void function is this codebase's callback idiom; braces around each
      // would change nothing at run time.
      '@typescript-eslint/no-confusing-void-expression': ['error', { ignoreArrowShorthand: true }],
    },
  },
  {
    // pg types every row as `any`: a row's columns are fixed by the SQL text
    // beside the query (and the migrations in sql/), which TypeScript cannot
    // see, so a `query<Row>()` type argument would be an unchecked cast that
    // only moves the same trust. The SQL layer and the tests and benchmarks
    // that read rows directly (where every value read feeds an assertion or a
    // reported number, so a wrong column fails loudly) read them as `any`.
    // Everywhere else (src/ outside engine) `any` stays refused.
    files: ['src/engine/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
    },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    extends: [js.configs.recommended],
    languageOptions: { globals: { ...globals.node } },
  },
  prettier,
);
