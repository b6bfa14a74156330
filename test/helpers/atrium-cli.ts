// Runs the `atrium` command line from source, exactly as bin/atrium runs the compiled one, so
// that tests of real `atrium serve` processes never depend on a stale dist/ build.
import { main } from '../../src/cli/main.js';

main(process.argv.slice(2)).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (error) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
