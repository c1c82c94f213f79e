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
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    extends: [js.configs.recommended],
    languageOptions: { globals: { ...globals.node } },
  },
  prettier,
);
