import { once } from 'node:events';
import net from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { cpuTurn } from '../../src/services/cpu-turns.js';

describe('cpu turns (issue 16: a burst of new replies does not hold the running ones up)', () => {
  let server: net.Server;
  let sender: net.Socket;
  let received: string[];

  beforeEach(async () => {
    received = [];
    server = net.createServer((socket) => socket.on('data', (data) => received.push(String(data))));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    sender = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    await once(sender, 'connect');
    // The accepted side is set up once the loop has polled for it.
    await new Promise((resolve) => setTimeout(resolve, 20));
  });

  afterEach(async () => {
    sender.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('waits for the callbacks already queued before it runs', async () => {
    const order: string[] = [];
    setImmediate(() => order.push('queued before'));
    await cpuTurn();
    order.push('section');
    expect(order).toEqual(['queued before', 'section']);
  });

  it('lets the network reads that arrived during a section run before the next section', async () => {
    const order: string[] = [];
    const first = cpuTurn().then(() => {
      order.push('first');
      // A token arriving while the first section runs (here: written by it).
      sender.write('token');
    });
    const second = cpuTurn().then(() => order.push(`second (read before it: ${received.join('')})`));
    await Promise.all([first, second]);
    expect(order).toEqual(['first', 'second (read before it: token)']);
  });

  // Retried: a pause of the worker (GC, a busy machine) of the 4 ms budget between two sections
  // moves the second to the next turn, which is the scheduler working, not failing.
  it(
    'starts more sections in a turn while its budget lasts, and leaves the rest to the next turn',
    { retry: 2 },
    async () => {
      const spin = (ms: number) => {
        const until = performance.now() + ms;
        while (performance.now() < until);
      };
      const seen: Record<string, string> = {};
      // The first turn was queued for one section; the three others share the next turn.
      const opening = cpuTurn();
      const quick = cpuTurn().then(() => {
        sender.write('a');
      });
      const long = cpuTurn().then(() => {
        seen.long = received.join('');
        spin(20); // far over the turn's budget
        sender.write('b');
      });
      const deferred = cpuTurn().then(() => {
        seen.deferred = received.join('');
      });
      await Promise.all([opening, quick, long, deferred]);
      // `long` ran in `quick`'s turn (no network read between them), `deferred` in the next one.
      expect(seen).toEqual({ long: '', deferred: 'ab' });
    },
  );

  it('runs every section, one at a time, in the order they asked', async () => {
    const order: number[] = [];
    let running = 0;
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        cpuTurn().then(async () => {
          running++;
          expect(running).toBe(1);
          order.push(i);
          await Promise.resolve(); // microtasks of a section finish inside its turn
          running--;
        }),
      ),
    );
    expect(order).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });
});
