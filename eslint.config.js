import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'Read configuration once in src/config.ts and pass it in.' }],
    },
  },
  {
    files: ['src/config.ts', 'src/cli.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
);
