/**
 * `npm run bench`: runs every `bench/*.bench.ts` (or the ones named on the command line) and
 * prints their lines. Each module exports `run(report)`, measures its own baseline in the same
 * run, and reports ratios against it. Benchmarks never run as part of `npm test`.
 */
import { readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export type Report = (line: string) => void;

const here = path.dirname(fileURLToPath(import.meta.url));
const wanted = process.argv.slice(2);
const files = readdirSync(here)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => wanted.length === 0 || wanted.some((w) => f.includes(w)))
  .sort();

console.log(
  `# Atrium benchmarks — node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${new Date().toISOString()}`,
);
for (const file of files) {
  const mod = (await import(pathToFileURL(path.join(here, file)).href)) as {
    run: (report: Report) => Promise<void>;
  };
  console.log(`\n## ${file.replace('.bench.ts', '')}`);
  await mod.run((line) => console.log(line));
}
process.exit(0);
