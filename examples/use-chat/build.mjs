// Bundles the example into ./dist (index.html + app.js): `node examples/use-chat/build.mjs [outdir]`.
import { copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.resolve(process.argv[2] ?? path.join(here, 'dist'));
await mkdir(outdir, { recursive: true });
await build({
  entryPoints: [path.join(here, 'app.tsx')],
  outfile: path.join(outdir, 'app.js'),
  bundle: true,
  format: 'esm',
  jsx: 'automatic',
  target: 'es2022',
  minify: true,
  define: { 'process.env.NODE_ENV': '"production"' },
  logLevel: 'warning',
});
await copyFile(path.join(here, 'index.html'), path.join(outdir, 'index.html'));
console.log(`built ${outdir}`);
