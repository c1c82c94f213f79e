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
      // `env.X?.trim() || DEFAULT`, `statementTimeoutMs || undefined`,
      // `Number(port) || 5432`: on strings and numbers `||` deliberately
      // treats '' and 0/NaN as "not set"; `??` would change that behaviour.
      // Objects and promises still get `??`.
      '@typescript-eslint/prefer-nullish-coalescing': ['error', { ignorePrimitives: { string: true, number: true, boolean: true } }],
      // `async` without `await` is deliberate where an API takes a promise
      // (fastify hooks, kafkajs handlers, Component.onStart, test stubs): a
      // throw inside becomes a rejection the caller handles. Dropping `async`
      // to satisfy the rule would turn those into synchronous throws.
      '@typescript-eslint/require-await': 'off',
      // `const { type: _t, ...rest } = o` drops a key on purpose.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
    },
  },
  {
    // pg types every row as `any`: a row's columns are fixed by the SQL text
    // beside the query (and the migrations in sql/), which TypeScript cannot
    // see, so a `query<Row>()` type argument would be an unchecked cast that
    // only moves the same trust. The SQL layer (src/engine, and the read,
    // retention and timer services' own queries) maps rows to typed objects
    // right beside the SQL; tests and benchmarks read rows and JSON bodies
    // directly, where every value read feeds an assertion or a reported
    // number, so a wrong column fails loudly.
    // Elsewhere in src/ `any` stays refused.
    files: ['src/engine/**/*.ts', 'src/read/**/*.ts', 'src/retention/**/*.ts', 'src/timers/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
    },
  },
  {
    // Tests: teardown hooks guard t.context fields with `?.` because ava
    // types the context as filled while a failed before-hook leaves it empty,
    // and flags set by callbacks while a test awaits look constant to
    // TypeScript's narrowing; both make no-unnecessary-condition wrong here.
    // JSON response bodies are `any` and every field read feeds an assertion.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unnecessary-condition': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    extends: [js.configs.recommended],
    languageOptions: { globals: { ...globals.node } },
  },
  prettier,
);
