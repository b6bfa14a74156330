// `atrium serve` from source (as test/helpers/atrium-cli.ts runs it) that gets SIGNAL while it
// starts, at the point SIGNAL_WHEN names: `taken`, as soon as the server takes its stop signals
// (its listen is then pending), or `listening`, as it prints the line saying it listens (on an
// empty data dir, the demo is not made yet). The signal is emitted as the process's own would
// be, in a microtask: at that point exactly, not whenever the system gets round to delivering it.
import { main } from '../../src/cli/main.js';

const signal = process.env.SIGNAL as 'SIGTERM' | 'SIGINT';
let sent = false;
const send = () => {
  if (sent) return;
  sent = true;
  queueMicrotask(() => process.emit(signal, signal));
};

if (process.env.SIGNAL_WHEN === 'taken') {
  process.on('newListener', (event) => {
    if (event === signal) send();
  });
} else {
  const log = console.log;
  console.log = (...args: unknown[]) => {
    log(...args);
    if (String(args[0]).startsWith('Atrium listening on')) send();
  };
}

main(['serve']).then((code) => {
  if (code === 1) process.exit(code);
  process.exitCode = code;
});
