// Runs the `atrium` command line from source, exactly as bin/atrium runs the compiled one, so
// that tests of real `atrium serve` processes never depend on a stale dist/ build.
import { main } from '../../src/cli/main.js';

main(process.argv.slice(2)).then((code) => {
  if (code === 1) process.exit(code);
  process.exitCode = code;
});
