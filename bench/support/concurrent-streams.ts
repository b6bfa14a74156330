import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { FakeUpstream } from '../../test/helpers/fake-upstream.js';
import { percentile } from './bench-setup.js';

/**
 * Many slow streamed replies at once, timed on one clock: the fake upstream (in this process)
 * notes when it writes each piece, the clients (in this process too) note when the piece's
 * bytes reach them, whichever server sits in between. Every piece is a unique marker, so a
 * piece is recognised in the upstream's SSE, in Atrium's UI message stream, and in a
 * coalesced event alike.
 */
export interface ConcurrentRun {
  /** Piece delays (ms from the upstream's write to the client's read), ascending. */
  delays: number[];
  /** The same delays by the second of the run the piece arrived in: where the slow ones are. */
  delaysBySecond: number[][];
  /** Pieces the clients received (all of them unless a stream broke). */
  received: number;
  /**
   * Piece delays while every client is on: from the moment the last client read its first
   * piece to the moment the first client read its last, ascending. With one reply per client
   * no reply starts or ends in that window; with more, replies come and go at a steady rate.
   */
  allFlowing: number[];
  /** Per reply, ms from sending the request to reading its first piece, ascending. */
  firstPiece: number[];
  expected: number;
  wallMs: number;
  /** CPU this process (the upstream and the clients) used during the run, ms. */
  harnessCpuMs: number;
}

/** A streamed POST the clients send: to the upstream, a relay, or Atrium. */
export interface StreamRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

let runCounter = 0;

export async function concurrentStreams(options: {
  upstream: FakeUpstream;
  clients: number;
  pieces: number;
  intervalMs: number;
  /** Spreads the clients' starts over this long, as users do not all press enter at once. */
  rampMs: number;
  /**
   * Replies each client asks for, one after the other (default 1). With more than one, replies
   * come and go while the clients keep as many running: the steady state of that load.
   */
  repliesPerClient?: number;
  request: StreamRequest;
}): Promise<ConcurrentRun> {
  const replies = options.repliesPerClient ?? 1;
  const run = ++runCounter;
  const sentAt = new Map<string, number>();
  const delays: number[] = [];
  const delaysBySecond: number[][] = [];
  let received = 0;
  const firstPiece: number[] = [];
  /**
   * Every piece read: when, and its delay (for the window in which all streams flow). Two number
   * arrays rather than a pair per piece: 100,000 small objects kept for the whole run would grow
   * this process's old generation, and its full collections would pause the clients mid-run.
   */
  const readAt: number[] = [];
  const readDelay: number[] = [];
  let lastFirstRead = 0;
  let firstLastRead = Number.POSITIVE_INFINITY;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const marker = new RegExp(`r${run}c\\d+q\\d+p\\d+`, 'g');
  const client = async (c: number) => {
    await new Promise((resolve) => setTimeout(resolve, (c * options.rampMs) / options.clients));
    for (let q = 0; q < replies; q++) await reply(c, q);
    firstLastRead = Math.min(firstLastRead, performance.now());
  };
  const reply = async (c: number, q: number) => {
    options.upstream.enqueue({
      kind: 'text',
      text: '',
      pieces: Array.from({ length: options.pieces }, (_, p) => `r${run}c${c}q${q}p${p} `),
      intervalMs: options.intervalMs,
      onPiece: (piece) => sentAt.set(piece.trimEnd(), performance.now()),
    });
    // node:http rather than fetch: fetch's web streams cost the load generator several times
    // the CPU per read, and on two cores the generator competes with the server it measures.
    const asked = performance.now();
    let first = true;
    const res = await post(options.request);
    if (res.statusCode !== 200) throw new Error(`answered ${res.statusCode}: ${await text(res)}`);
    res.setEncoding('latin1'); // the markers are ASCII; no UTF-8 decoding per read
    let pending = '';
    for await (const data of res as AsyncIterable<string>) {
      const now = performance.now();
      pending += data;
      // Only whole events: a marker may be split across two reads.
      const end = pending.lastIndexOf('\n\n');
      if (end === -1) continue;
      for (const [found] of pending.slice(0, end).matchAll(marker)) {
        const sent = sentAt.get(found);
        if (sent === undefined) continue;
        sentAt.delete(found); // read once: the map holds only the pieces in flight
        delays.push(now - sent);
        readAt.push(now);
        readDelay.push(now - sent);
        if (first) {
          first = false;
          firstPiece.push(now - asked);
          if (q === 0) lastFirstRead = Math.max(lastFirstRead, now);
        }
        (delaysBySecond[Math.floor((now - started) / 1000)] ??= []).push(now - sent);
        received++;
      }
      pending = pending.slice(end + 2);
    }
  };
  await Promise.all(Array.from({ length: options.clients }, (_, c) => client(c)));
  return {
    delays: delays.sort((a, b) => a - b),
    delaysBySecond: Array.from(delaysBySecond, (second) => (second ?? []).sort((a, b) => a - b)),
    received,
    allFlowing: readDelay
      .filter((_, i) => readAt[i]! >= lastFirstRead && readAt[i]! <= firstLastRead)
      .sort((a, b) => a - b),
    firstPiece: firstPiece.sort((a, b) => a - b),
    expected: options.clients * replies * options.pieces,
    wallMs: performance.now() - started,
    harnessCpuMs: cpuOf(process.cpuUsage(cpuBefore)),
  };
}

const cpuOf = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1000;

function post(request: StreamRequest): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request(request.url, { method: 'POST', headers: request.headers }, resolve);
    req.on('error', reject);
    req.end(request.body);
  });
}

async function text(res: http.IncomingMessage) {
  let body = '';
  for await (const data of res) body += String(data);
  return body;
}

/** CPU time (user + system, ms) a process has used so far, from /proc (Linux). */
export function cpuMs(pid: number): number {
  // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100; // USER_HZ is 100 on Linux
}

/** Resident set size of a process, in bytes, from /proc (Linux). */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN) * 1024;
}

/** Samples a process's RSS until stopped; returns the peak. */
export function sampleRss(pid: number, everyMs = 50) {
  let peak = rssBytes(pid);
  const timer = setInterval(() => {
    peak = Math.max(peak, rssBytes(pid));
  }, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      return Math.max(peak, rssBytes(pid));
    },
  };
}

export const p99 = (run: ConcurrentRun) => percentile(run.delays, 99);
export const p50 = (run: ConcurrentRun) => percentile(run.delays, 50);

/** The p99 delay of each second of the run (ms), with how many pieces arrived in it. */
export const p99BySecond = (run: ConcurrentRun) =>
  run.delaysBySecond.map(
    (second) => `${second.length ? percentile(second, 99).toFixed(1) : '-'} (${second.length})`,
  );
