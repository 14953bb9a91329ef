import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The layers of docs/design.md, top to bottom, held by lint: a module may import its own layer and those below it,
 * never one above. Imports go one way, entry → app/routes/http → services → domain → storage → utilities. A name
 * ending in .js is one module (a file of src/, or of a folder whose other files sit elsewhere); any other is a folder.
 *   - entry: the CLI, the server and the worker threads of an instance (src/workers/ is started by src/serve/).
 *   - services: the composition root, and what it hands the layers below as their observers: the metrics
 *     (prom-client) and tracing (OpenTelemetry), each implementing interfaces those layers declare.
 *   - client: plantstore/client, the package's API client for Node and browsers; it imports only its own files, so
 *     it never pulls in the server (the CLI's push and watch are built on it).
 *   - utilities: importable from everywhere, importing nothing above them. src/plant.ts is one: a leaf of a plain
 *     type (the domain's Plant) that storage stores, outside the domain's folders so that no folder imports back.
 */
const levels = [
  { name: 'entry', modules: ['cli', 'serve', 'workers'] },
  { name: 'app', modules: ['app.js', 'routes', 'http', 'schemas.js'] },
  {
    name: 'services',
    modules: [
      'services.js',
      'observability/metrics.js',
      'observability/metrics-render.js',
      'observability/feed-metrics.js',
      'observability/webhook-metrics.js',
      'observability/request-durations.js',
      'tracing',
    ],
  },
  { name: 'domain', modules: ['plants', 'auth', 'health', 'webhooks', 'transfer', 'feed'] },
  { name: 'storage', modules: ['storage'] },
  { name: 'utilities', modules: ['config', 'json', 'observability/log.js', 'observability/redact-headers.js', 'plant.js'] },
  { name: 'client', modules: ['client'] },
];

/**
 * Every folder and top-level module of src/ has its layer: a new one fails lint here until it is placed in `levels`
 * (a folder whose files sit in different layers, like observability/, lists each file).
 */
function unplaced() {
  const listed = new Set(levels.flatMap((level) => level.modules));
  const src = path.join(path.dirname(fileURLToPath(import.meta.url)), 'src');
  const missing = [];
  for (const entry of fs.readdirSync(src, { withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith('.ts')) {
      if (!listed.has(entry.name.replace(/\.ts$/, '.js'))) missing.push(`src/${entry.name}`);
    } else if (entry.isDirectory() && !listed.has(entry.name)) {
      for (const file of fs.readdirSync(path.join(src, entry.name), { recursive: true })) {
        if (file.endsWith('.ts') && !listed.has(`${entry.name}/${file.replace(/\.ts$/, '.js')}`)) missing.push(`src/${entry.name}/${file}`);
      }
    }
  }
  return missing;
}
const missing = unplaced();
if (missing.length > 0) throw new Error(`eslint.config.js: ${missing.join(', ')} has no layer: add it to \`levels\` (docs/design.md#layers).`);

const HTTP_FRAMEWORK = ['fastify', 'fastify/*', '@fastify/*'];

/**
 * Each folder (or module) of src/ and what it may not import on top of the layers above its own: peers it must not
 * know, and packages. `files` are the globs it covers; `top` marks modules directly in src/, whose imports start "./".
 */
const layers = [
  {
    level: 'entry',
    files: ['src/workers/**/*.ts'],
    forbidden: ['serve', 'cli'],
    why: 'the worker threads are started by src/serve/ and know neither it nor the CLI, so the two make no circle',
  },
  { level: 'entry', files: ['src/serve/**/*.ts'], forbidden: ['cli'], why: 'the server is started by the CLI and knows it not' },
  { level: 'entry', files: ['src/cli/**/*.ts'], forbidden: ['workers'], why: 'the CLI starts an instance of worker threads through src/serve/, never itself' },
  { level: 'app', files: ['src/app.ts'], top: true, forbidden: [], why: 'buildApp never listens: only the entry does' },
  {
    level: 'app',
    files: ['src/routes/**/*.ts'],
    forbidden: ['app.js'],
    why: 'the routes are RouteSpecs that src/app.ts registers; they know no app',
  },
  {
    level: 'app',
    files: ['src/http/**/*.ts'],
    forbidden: ['app.js', 'routes'],
    why: 'the HTTP helpers and plugins are handed the routes by src/app.ts',
  },
  { level: 'app', files: ['src/schemas.ts'], top: true, forbidden: ['app.js', 'routes', 'http'], packages: HTTP_FRAMEWORK, why: 'the API shapes are plain TypeBox schemas every HTTP module reads' },
  { level: 'services', files: ['src/services.ts'], top: true, forbidden: [], packages: HTTP_FRAMEWORK, why: 'the services know no transport: the app is built on them' },
  {
    level: 'services',
    files: [
      'src/observability/metrics.ts',
      'src/observability/metrics-render.ts',
      'src/observability/feed-metrics.ts',
      'src/observability/webhook-metrics.ts',
      'src/observability/request-durations.ts',
    ],
    forbidden: ['services.js', 'tracing'],
    why: 'the metrics implement the observers the layers below declare; src/services.ts wires them',
  },
  {
    level: 'services',
    files: ['src/tracing/**/*.ts'],
    forbidden: ['services.js', 'observability/metrics.js', 'plants', 'auth', 'health', 'webhooks', 'transfer'],
    packages: [...HTTP_FRAMEWORK, 'prom-client', 'prom-client/*'],
    why: 'tracing implements the tracer interfaces the layers below declare (a store\'s QueryTracer, the dispatcher\'s DeliveryTracer); src/services.ts hands it in',
  },
  {
    level: 'domain',
    files: ['src/plants/**/*.ts'],
    forbidden: [],
    packages: HTTP_FRAMEWORK,
    why: 'the domain knows no HTTP: routes turn requests into plain input, and the edge maps domain errors',
  },
  {
    level: 'domain',
    files: ['src/auth/**/*.ts'],
    forbidden: ['plants'],
    packages: HTTP_FRAMEWORK,
    why: 'token checks know no HTTP: the Authorization header is parsed in src/http/bearer.ts',
  },
  {
    level: 'domain',
    files: ['src/transfer/**/*.ts'],
    forbidden: [],
    packages: HTTP_FRAMEWORK,
    why: 'data movement (export, import, copy) works on the storage interfaces and the domain; the CLI hands it the NewPlant reader of src/http',
  },
  {
    level: 'domain',
    files: ['src/webhooks/**/*.ts'],
    forbidden: ['auth', 'plants', 'health'],
    packages: HTTP_FRAMEWORK,
    why: 'the dispatcher sends webhooks (undici) from the outbox through the storage interfaces; it serves no request',
  },
  {
    level: 'domain',
    files: ['src/feed/**/*.ts'],
    forbidden: ['auth', 'plants', 'health', 'webhooks', 'transfer'],
    packages: HTTP_FRAMEWORK,
    why: 'the change feed reads the change log and renders each change once; the event-stream route writes it to sockets',
  },
  { level: 'domain', files: ['src/health/**/*.ts'], forbidden: [], packages: HTTP_FRAMEWORK, why: 'readiness knows no HTTP: /readyz is a route over it' },
  {
    level: 'storage',
    files: ['src/storage/**/*.ts'],
    forbidden: [],
    packages: [...HTTP_FRAMEWORK, 'undici'],
    why: 'storage knows nothing above it: it raises storage errors (src/storage/errors.ts), never HTTP ones, and is handed its observer and tracer',
  },
  {
    level: 'utilities',
    files: ['src/config/**/*.ts', 'src/json/**/*.ts', 'src/observability/log.ts', 'src/observability/redact-headers.ts'],
    forbidden: ['observability/metrics.js', 'observability/metrics-render.js', 'observability/feed-metrics.js', 'observability/webhook-metrics.js'],
    // log.ts's own folder holds the metrics, a layer above it.
    sameFolder: ['metrics.js', 'metrics-render.js', 'feed-metrics.js', 'webhook-metrics.js'],
    packages: [...HTTP_FRAMEWORK, 'undici', 'pg'],
    why: 'config, JSON and logging are utilities every layer imports: they import only each other',
  },
  {
    level: 'client',
    files: ['src/client/**/*.ts'],
    forbidden: [],
    why: 'plantstore/client runs in browsers as in Node on the platform alone: it imports only its own files (see below)',
  },
];

// Every module of `levels` has its rule in `layers` (src/plant.ts has one of its own, below).
const ruled = new Set(layers.flatMap((layer) => layer.files));
const unruled = levels
  .flatMap((level) => level.modules)
  .filter((module) => module !== 'plant.js')
  .map((module) => (module.endsWith('.js') ? `src/${module.replace(/\.js$/, '.ts')}` : `src/${module}/**/*.ts`))
  .filter((files) => !ruled.has(files));
if (unruled.length > 0) throw new Error(`eslint.config.js: ${unruled.join(', ')} has a layer but no entry in \`layers\`.`);

/** What a module at `level` may not import: everything of the levels above it. */
function above(level) {
  const at = levels.findIndex((candidate) => candidate.name === level);
  if (at < 0) throw new Error(`eslint.config.js: no layer named ${level}`);
  return levels.slice(0, at).flatMap((candidate) => candidate.modules);
}

const escape = (text) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** A regex alternative for a module: a folder (and all under it) or one file. */
function alternative(module) {
  return module.endsWith('.js') ? `${escape(module)}$` : `${escape(module)}/`;
}

/** The import patterns a layer's files may not use. */
function layerPatterns({ level, top, forbidden, sameFolder = [], packages = [], why }) {
  const names = [...new Set([...above(level), ...forbidden])];
  // Relative imports: from src/ a module starts "./"; from a folder, it climbs out ("../", never stopping on a "./").
  const prefix = top ? '^\\./' : '^(\\.\\./)+(?!\\.)';
  const patterns = [
    {
      regex: `${prefix}(${names.map(alternative).join('|')})`,
      message: `${level === 'utilities' ? 'a utility' : `the ${level} layer`} may not import ${names.join(', ')}: ${why} (docs/design.md#layers).`,
    },
  ];
  if (sameFolder.length > 0) {
    patterns.push({ regex: `^\\./(${sameFolder.map(escape).join('|')})$`, message: `a utility may not import ${sameFolder.join(', ')} beside it: ${why}.` });
  }
  if (packages.length > 0) patterns.push({ group: packages, message: `this module may not use ${packages.join(', ')}: ${why}.` });
  if (level !== 'entry' && level !== 'services' && level !== 'app') {
    patterns.push({
      group: ['prom-client', 'prom-client/*'],
      message: 'only src/observability/metrics.ts (and the metrics modules beside it) uses the metrics library: each layer reports to an observer interface it declares.',
    });
  }
  return patterns;
}

/**
 * Within storage, on top of its layer's rule: the interfaces (a Store and its sub-stores) know no database, and each
 * database's modules know no other's, so a SQLite deployment never loads pg (src/storage/open.ts loads it on demand).
 */
const storageLayer = layers.find((layer) => layer.level === 'storage');
const httpLayer = layers.find((layer) => layer.files.includes('src/http/**/*.ts'));
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
    files: layer.files,
    ...(layer.ignores ? { ignores: layer.ignores } : {}),
    rules: { 'no-restricted-imports': ['error', { patterns: layerPatterns(layer) }] },
  })),
  // A later entry's options replace an earlier one's for the same rule, so each part repeats the storage layer's patterns.
  ...storageParts.map(({ files, ignores, paths, patterns }) => ({
    files,
    ...(ignores ? { ignores } : {}),
    rules: { 'no-restricted-imports': ['error', { paths, patterns: [...layerPatterns(storageLayer), ...patterns] }] },
  })),
  {
    // Every layer may import src/plant.ts because it imports nothing: keep it a leaf.
    files: ['src/plant.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ regex: '.', message: 'src/plant.ts is a leaf of plain types that every layer, storage included, imports: it imports nothing.' }] }] },
  },
  {
    // The app's plugins (src/http/plugins/): each is one concern of the app, registered by src/app.ts with what it
    // needs (the routes as RouteSpecs, the services' interfaces), so none reaches up to the app or the entry, or across
    // to the route modules or down to storage (the services stand between). Repeats the HTTP layer's patterns (see above).
    files: ['src/http/plugins/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...layerPatterns(httpLayer),
            {
              regex: '^(\\.\\./)+storage/',
              message: 'src/http/plugins may not import storage: src/app.ts hands a plugin the routes and services it needs.',
            },
          ],
        },
      ],
    },
  },
  // Only src/app.ts registers the plugins: the HTTP helpers and the routes below it know none, so which hooks run, and
  // in what order, is read in one place. Each repeats its layer's patterns.
  ...[
    { files: ['src/http/*.ts'], layer: httpLayer },
    { files: ['src/routes/**/*.ts'], layer: layers.find((layer) => layer.files.includes('src/routes/**/*.ts')) },
  ].map(({ files, layer }) => ({
    files,
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...layerPatterns(layer),
            { regex: '(^|/)plugins/', message: 'Only src/app.ts registers the plugins of src/http/plugins/: routes and HTTP helpers may not import them.' },
          ],
        },
      ],
    },
  })),
  {
    // plantstore/client imports nothing outside src/client/, no package and no node: module, and uses no Node global:
    // it is served to browsers as it is (tsconfig.client.json checks it against the DOM's types alone).
    files: ['src/client/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^(?!\\./[^/]+\\.js$)', message: 'src/client/ imports only its own files (./name.js): no package, no node: module, nothing of the server.' }] },
      ],
      'no-restricted-globals': ['error', 'Buffer', 'process', 'require', '__dirname', '__filename', 'setImmediate'],
    },
  },
  {
    // The CLI reads the environment where it starts a process (NODE_OPTIONS), loads the configuration, and reads a
    // copy target as DATABASE_URL would be read; serve leaves the young generation to a NODE_OPTIONS that sizes it.
    files: ['src/config/config.ts', 'src/cli/launcher.ts', 'src/cli/dispatch.ts', 'src/cli/commands/copy.ts', 'src/serve/young-generation.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
);
