// Builds the console into crates/sundial-http/console (or the directory given as the first
// argument): index.html, app.js and app.css (minified, deterministic: no timestamps, no hashes
// of the build machine), and THIRD_PARTY_LICENSES.txt with the licenses of the bundled packages.

import * as esbuild from 'esbuild';
import { mkdir, copyFile, readFile, writeFile, readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(process.argv[2] ?? path.join(here, '../crates/sundial-http/console'));
await mkdir(out, { recursive: true });

const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: { app: 'src/main.js' },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  outdir: out,
  legalComments: 'none',
  charset: 'utf8',
  metafile: true,
  logLevel: 'warning',
});
await copyFile(path.join(here, 'src/index.html'), path.join(out, 'index.html'));

// The licenses of every package bundled into app.js, in a stable order.
const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
  if (m) packages.add(m[1]);
}
let licenses = 'Third-party software bundled into app.js and app.css:\n';
for (const name of [...packages].sort()) {
  const dir = path.join(here, 'node_modules', name);
  const pkg = JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8'));
  const file = (await readdir(dir)).filter((f) => /^(LICEN[SC]E|COPYING)/i.test(f)).sort()[0];
  const text = file ? await readFile(path.join(dir, file), 'utf8') : `License: ${pkg.license}\n`;
  licenses += `\n==== ${name} ${pkg.version} (${pkg.license}) ====\n\n${text.trim()}\n`;
}
await writeFile(path.join(out, 'THIRD_PARTY_LICENSES.txt'), licenses);

for (const [file, { bytes }] of Object.entries(result.metafile.outputs)) {
  console.log(`${path.relative(process.cwd(), file)}: ${bytes} bytes`);
}
