import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The layers of docs/design.md, held by lint: a folder may not import from the folders (or packages) named here.
 * Imports go one way, entry → app/routes/http → services → domain (plants, auth, health) → storage. src/workers is
 * part of the entry (an instance of worker threads, started by src/serve/server.ts), so no layer below may import it.
 */
const layers = [
  {
    folder: 'src/storage',
    forbidden: ['http', 'routes', 'auth', 'plants', 'health', 'webhooks'],
    packages: ['fastify', 'fastify/*', '@fastify/*', 'undici'],
    why: 'storage knows nothing above it: it raises storage errors (src/storage/errors.ts), never HTTP ones',
  },
  {
    folder: 'src/plants',
    forbidden: ['http', 'routes'],
    packages: ['fastify', 'fastify/*', '@fastify/*'],
    why: 'the domain knows no HTTP: routes turn requests into plain input, and the edge maps domain errors',
  },
  {
    folder: 'src/auth',
    forbidden: ['http', 'routes', 'plants'],
    packages: ['fastify', 'fastify/*', '@fastify/*'],
    why: 'token checks know no HTTP: the Authorization header is parsed in src/http/bearer.ts',
  },
  {
    folder: 'src/transfer',
    forbidden: ['http', 'routes'],
    packages: ['fastify', 'fastify/*', '@fastify/*'],
    why: 'data movement (export, import, copy) works on the storage interfaces and the domain; the CLI hands it the NewPlant reader of src/http',
  },
  {
    folder: 'src/webhooks',
    forbidden: ['http', 'routes', 'auth', 'plants', 'health'],
    packages: ['fastify', 'fastify/*', '@fastify/*'],
    why: 'the dispatcher sends webhooks (undici) from the outbox through the storage interfaces; it serves no request',
  },
  {
    folder: 'src/health',
    forbidden: ['http', 'routes'],
    packages: ['fastify', 'fastify/*', '@fastify/*'],
    why: 'readiness knows no HTTP: /readyz is a route over it',
  },
];

/** The import patterns a layer's files may not use. */
function layerPatterns({ folder, forbidden, packages, why }) {
  return [
    {
      // Relative imports that climb out of the folder into a forbidden one, into the CLI or the entry's workers, or into
      // the app or the schemas. src/plants/plant.ts is the exception: a leaf module of plain types (the domain's Plant)
      // that imports nothing, so importing it pulls no layer above in; storage stores that shape.
      regex: `^(\\.\\./)+(?!plants/plant\\.js$)(${forbidden.join('|')}|cli|workers|serve)/|^(\\.\\./)+(app|schemas|services|observability/metrics)\\.js$`,
      message: `${folder} may not import from ${forbidden.join(', ')}, the CLI, the worker threads of an instance, the app, the HTTP schemas or the metrics: ${why}.`,
    },
    { group: packages, message: `${folder} may not use the HTTP framework or client: ${why}.` },
    {
      group: ['prom-client', 'prom-client/*'],
      message: `${folder} may not use the metrics library: it reports to an observer interface it declares, implemented with prom-client in src/observability/metrics.ts.`,
    },
  ];
}

/**
 * Within storage, on top of its layer's rule: the interfaces (a Store and its sub-stores) know no database, and each
 * database's modules know no other's, so a SQLite deployment never loads pg (src/storage/open.ts loads it on demand).
 */
const storageLayer = layers.find((layer) => layer.folder === 'src/storage');
const storageParts = [
  {
    files: ['src/storage/*.ts'],
    ignores: ['src/storage/open.ts'],
    paths: [],
    patterns: [{ regex: '^\\./(sqlite|postgres)/', message: 'the storage interfaces know no database: each database implements them in sqlite/ or postgres/, and open.ts picks one.' }],
  },
  {
    files: ['src/storage/sqlite/**/*.ts'],
    paths: [{ name: 'pg', message: 'SQLite code never loads pg: a SQLite deployment does not need it.' }],
    patterns: [{ regex: '^\\.\\./postgres/', message: "SQLite code may not import PostgreSQL's: what both databases share lives in src/storage/ as plain code." }],
  },
  {
    files: ['src/storage/postgres/**/*.ts'],
    paths: [{ name: 'node:sqlite', message: 'PostgreSQL code never opens SQLite.' }],
    patterns: [{ regex: '^\\.\\./sqlite/', message: "PostgreSQL code may not import SQLite's: what both databases share lives in src/storage/ as plain code." }],
  },
];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'Read configuration once in src/config/config.ts and pass it in.' }],
    },
  },
  ...layers.map((layer) => ({
    files: [`${layer.folder}/**/*.ts`],
    rules: { 'no-restricted-imports': ['error', { patterns: layerPatterns(layer) }] },
  })),
  // A later entry's options replace an earlier one's for the same rule, so each part repeats the storage layer's patterns.
  ...storageParts.map(({ files, ignores, paths, patterns }) => ({
    files,
    ...(ignores ? { ignores } : {}),
    rules: { 'no-restricted-imports': ['error', { paths, patterns: [...layerPatterns(storageLayer), ...patterns] }] },
  })),
  {
    // Every layer may import src/plants/plant.ts (see layerPatterns) because it imports nothing: keep it a leaf.
    files: ['src/plants/plant.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ regex: '.', message: 'src/plants/plant.ts is a leaf of plain types that every layer, storage included, imports: it imports nothing.' }] }] },
  },
  {
    // The app's plugins (src/http/plugins/): each is one concern of the app, registered by src/app.ts with what it
    // needs (the routes as RouteSpecs, the services' interfaces), so none reaches up to the app or the entry, or across
    // to the route modules or down to storage (the services stand between).
    files: ['src/http/plugins/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+(cli|workers|storage|routes|serve)/|^(\\.\\./)+app\\.js$',
              message:
                'src/http/plugins may not import the app, the entry (server, CLI, worker threads), the route modules or storage: src/app.ts hands a plugin the routes and services it needs.',
            },
          ],
        },
      ],
    },
  },
  {
    // Only src/app.ts registers the plugins: the HTTP helpers and the routes below it know none, so which hooks run,
    // and in what order, is read in one place.
    files: ['src/http/*.ts', 'src/routes/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '(^|/)plugins/', message: 'Only src/app.ts registers the plugins of src/http/plugins/: routes and HTTP helpers may not import them.' }] },
      ],
    },
  },
  {
    // The CLI reads the environment where it starts a process (NODE_OPTIONS), loads the configuration, and reads a
    // copy target as DATABASE_URL would be read.
    files: ['src/config/config.ts', 'src/cli/launcher.ts', 'src/cli/dispatch.ts', 'src/cli/commands/copy.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
);
