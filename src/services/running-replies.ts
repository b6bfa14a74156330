import { randomBytes } from 'node:crypto';
import { createResumableStreamContext, type ResumableStreamContext } from 'resumable-stream/generic';
import type { Coordination } from '../coordination/coordination.js';
import { ApiError } from '../errors.js';

/**
 * Why a reply was cut short: the user's stop, its chat deleted (a stop whose chat is gone: a JSON
 * reply answers 404, not a 409 naming that chat), or the process shutting down.
 */
export type StopReason = 'stopped' | 'deleted' | 'interrupted';

/** How long a running reply's marker outlives its last heartbeat (a crashed process's replies). */
const ACTIVE_TTL_SECONDS = 30;
const HEARTBEAT_MS = 10_000;
/** A busy process asks clients to come back after this long. */
const BUSY_RETRY_AFTER_SECONDS = 5;
/** How long a stop waits for the stopped reply to be stored before it answers anyway. */
const STOP_WAIT_MS = 10_000;
/** How often a stop looks whether another process has stored the reply it stopped. */
const SETTLED_POLL_MS = 50;
/** Of those looks, every how many also asks whether that process is still alive (~1 s). */
const GONE_CHECK_EVERY = 20;
/** A reply's settled marker outlives its release by this long: ample for the stops waiting on it. */
const SETTLED_TTL_SECONDS = 60;
/** How long after a failed subscription (see `start`) it is made again. */
const SUBSCRIBE_RETRY_MS = 1_000;

/** A reply admitted to run: make its stream resumable, and release it when it has been stored. */
export interface ReplyTicket {
  /**
   * Keeps the reply's server-sent-event text, read from `sse` as it is made, for `resume` from
   * any process while it runs. The reply's own client gets the text straight from it.
   */
  share(sse: ReadableStream<string>): Promise<void>;
  release(): void;
}

interface LocalReply {
  chatId: string;
  messageId: string;
  /**
   * A reply whose stream will be shared for resuming (`admit`'s `resumable`): settles once it is
   * shared (or its sharing given up), or the reply released (refused while being set up).
   */
  shared?: Promise<void>;
  stop(reason: StopReason): void;
  /** Marks the chat active with this reply, for other processes (renewed by a heartbeat). */
  mark(): void;
  released: Promise<void>;
  /**
   * Resolves once the reply is released and its markers are cleared (the chat no longer runs it
   * for any process), the settled marker written for the stops of other processes.
   */
  settled: Promise<void>;
}

/**
 * The replies being generated, per process, with what stops and resumes them: a stop reaches the
 * process that runs the reply (Redis publish/subscribe when several processes share Redis), a
 * resume replays the reply's stream from its start (`resumable-stream`), and a chat is `active`
 * while a marker with a short expiry, renewed by its process, says so and that process is alive.
 *
 * A process killed outright (SIGKILL, out of memory) leaves its markers for their expiry, but its
 * Redis connections close with it: each process listens on a channel of its own, each reply
 * names that process in an owner key, and a marker whose owner no longer listens is no reply
 * (what a crash loses, as without Redis, where a reply's state dies with its process).
 */
export class RunningReplies {
  /**
   * Every reply running here. A chat may have more than one (a second turn sent while a reply
   * still runs): each counts against the limit, is stopped with its chat and waited for at
   * shutdown.
   */
  private readonly replies = new Set<LocalReply>();
  /** The latest reply of each chat running here: what resume and the chat's state report. */
  private readonly local = new Map<string, LocalReply>();
  private readonly streams: ResumableStreamContext;
  private readonly stopChannel: string;
  private started?: Promise<void>;
  /** Set by shutdown: no new reply starts on a process that is going away. */
  private draining = false;
  /** Replays of replies (resume) this process sends, each with how to end it. */
  private readonly replays = new Set<{ messageId: string; end(): void }>();
  /** Set at the end of shutdown's drain: a replay set up from then on ends at once. */
  private replaysEnded = false;
  /** This process (this instance of it): what the owner keys of its replies hold. */
  private readonly instanceId = randomBytes(9).toString('base64url');
  /**
   * Set once this process listens on its own channel: its replies name it as their owner only
   * from then on (before, other processes trust their markers as they are).
   */
  private listening = false;
  /**
   * Resumes of this process waiting for a reply being set up on another process, per reply: each
   * is woken when that process says the set-up ended (or this one shuts down).
   */
  private readonly setUpWaiters = new Map<string, Set<() => void>>();

  /** Whether shutdown has begun (readiness answers 503, so a load balancer sends no more). */
  get isDraining(): boolean {
    return this.draining;
  }

  constructor(
    private readonly coordination: Coordination,
    private readonly options: {
      maxConcurrent: number;
      keyPrefix: string;
      /**
       * How long a resume waits for a reply another process is setting up (default 120 s, the
       * default upstream timeout; the app passes ATRIUM_UPSTREAM_TIMEOUT_MS, which bounds the
       * slowest step of a set-up, fetching the turn's files).
       */
      setUpWaitMs?: number;
      /** How long `stopAndWait` waits for the stopped reply to be stored (default STOP_WAIT_MS). */
      stopWaitMs?: number;
    },
  ) {
    this.streams = createResumableStreamContext({
      keyPrefix: `${options.keyPrefix}:stream`,
      // A server process stays alive by itself; nothing to extend.
      waitUntil: null,
      publisher: neverRejecting(coordination.publisher),
      subscriber: neverRejecting(coordination.subscriber),
    });
    this.stopChannel = `${options.keyPrefix}:stop`;
  }

  /**
   * Listens for stops published by other processes, and on this process's own channel. A
   * subscription that fails is made again (`onFailure` is told each time) until it holds: ioredis
   * rejects a SUBSCRIBE it had queued when its connection fails for good at that moment (a wrong
   * password, a refused ready check) and renews on reconnect only the subscriptions it made, so a
   * process whose first ones failed never listened, after Redis answered again too: stops sent
   * to other processes never reached its replies until it was restarted.
   */
  start(onFailure: (error: unknown) => void = () => undefined): Promise<void> {
    const subscribe = async (channel: string, callback: (message: string) => void): Promise<void> => {
      for (;;) {
        try {
          await this.coordination.subscriber.subscribe(channel, callback);
          return;
        } catch (error) {
          onFailure(error);
          // The subscriber waits for its connection by itself: this only spaces failures out.
          await new Promise((resolve) => setTimeout(resolve, SUBSCRIBE_RETRY_MS).unref());
          // A process shutting down (its connections about to close) listens no more.
          if (this.draining) throw error;
        }
      }
    };
    this.started ??= Promise.all([
      subscribe(this.instanceChannel(this.instanceId), () => undefined).then(() => {
        this.listening = true;
      }),
      subscribe(this.stopChannel, (message) => {
        try {
          const { chatId, messageId, reason, deleted } = JSON.parse(message) as {
            chatId: string;
            messageId: string;
            reason: StopReason;
            deleted?: boolean;
          };
          for (const reply of this.replies) {
            if (reply.chatId === chatId && reply.messageId === messageId) {
              reply.stop(deleted ? 'deleted' : reason);
            }
          }
        } catch {
          // Not ours to read; ignore.
        }
      }),
    ]).then(() => undefined);
    return this.started;
  }

  get size(): number {
    return this.replies.size;
  }

  private activeKey(chatId: string): string {
    return `${this.options.keyPrefix}:active:${chatId}`;
  }

  /** One reply's own marker: set while it runs anywhere, whatever turn the chat's marker names. */
  private replyKey(messageId: string): string {
    return `${this.options.keyPrefix}:reply:${messageId}`;
  }

  /** The process running a reply (its instance id), beside the reply's markers. */
  private ownerKey(messageId: string): string {
    return `${this.options.keyPrefix}:owner:${messageId}`;
  }

  /**
   * Set while a streamed reply is being set up (admitted, its stream not shared yet), for a resume
   * reaching another process: that process waits for it rather than answering that nothing runs.
   */
  private setUpKey(messageId: string): string {
    return `${this.options.keyPrefix}:setting-up:${messageId}`;
  }

  /** Where a reply's process tells that its set-up ended (its stream shared, or it was refused). */
  private setUpChannel(messageId: string): string {
    return `${this.options.keyPrefix}:set-up:${messageId}`;
  }

  /**
   * Written by a reply's process once the reply is stored and its markers cleared: a stop that
   * reached another process answers when it is there (`stopAndWait`).
   */
  private settledKey(messageId: string): string {
    return `${this.options.keyPrefix}:settled:${messageId}`;
  }

  /** The channel a process listens on while it lives: its connection ending ends the listening. */
  private instanceChannel(instanceId: string): string {
    return `${this.options.keyPrefix}:process:${instanceId}`;
  }

  /**
   * Of these replies, named by markers, those whose process is gone: it no longer listens on its
   * channel (killed, its connection closed), or it is this process and they no longer run here
   * (a marker whose delete failed). A reply without an owner key (set by a process of an earlier
   * version, or before its process listened) is taken as its markers say, and so is every reply
   * when Redis does not tell who listens.
   */
  private async goneReplies(messageIds: string[]): Promise<Set<string>> {
    const gone = new Set<string>();
    if (messageIds.length === 0) return gone;
    const { publisher } = this.coordination;
    const owners = await publisher.getMany(messageIds.map((id) => this.ownerKey(id)));
    const elsewhere = new Map<string, string[]>();
    owners.forEach((owner, i) => {
      const messageId = messageIds[i]!;
      if (typeof owner !== 'string' || owner === '') return;
      if (owner === this.instanceId) {
        if (![...this.replies].some((reply) => reply.messageId === messageId)) gone.add(messageId);
        return;
      }
      elsewhere.set(owner, [...(elsewhere.get(owner) ?? []), messageId]);
    });
    if (elsewhere.size === 0) return gone;
    const processes = [...elsewhere.keys()];
    const counts = await publisher
      .subscriberCounts(processes.map((id) => this.instanceChannel(id)))
      .catch(() => undefined);
    processes.forEach((process, i) => {
      if (counts?.[i] === 0) for (const messageId of elsewhere.get(process)!) gone.add(messageId);
    });
    return gone;
  }

  /**
   * Registers a reply; 503 `service_unavailable` when this process shuts down (a load balancer
   * sends the retry to another) or already runs its maximum.
   */
  /**
   * `resumable`: the reply's stream will be shared (`ReplyTicket.share`) once it is set up; a
   * resume asked before then waits for it (`resume`).
   */
  admit(
    chatId: string,
    messageId: string,
    stop: (reason: StopReason) => void,
    { resumable = false }: { resumable?: boolean } = {},
  ): ReplyTicket {
    if (this.draining) {
      throw new ApiError(
        'service_unavailable',
        'This server is shutting down; send the request again',
        { retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS },
        { refusal: 'info' },
      );
    }
    if (this.replies.size >= this.options.maxConcurrent) {
      throw new ApiError(
        'service_unavailable',
        'Too many replies are being generated right now; try again shortly',
        { retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS },
        { refusal: 'warn' },
      );
    }
    let release!: () => void;
    let settle!: () => void;
    let settleShared: () => void = () => undefined;
    const { publisher } = this.coordination;
    // Other processes learn that this reply is being set up (a resume reaching them waits for it),
    // and when that ends. Without shared coordination every resume reaches this process.
    let settingUp = resumable && this.coordination.shared;
    const setUpKey = this.setUpKey(messageId);
    const markSettingUp = () => {
      if (settingUp) void publisher.set(setUpKey, '1', { EX: ACTIVE_TTL_SECONDS }).catch(() => undefined);
    };
    const endSetUp = () => {
      if (!settingUp) return;
      settingUp = false;
      // In this order on the one connection: a resume that finds the key still set is listening
      // already, and gets the message.
      void publisher.del(setUpKey).catch(() => undefined);
      void publisher.publish(this.setUpChannel(messageId), 'ended').catch(() => undefined);
    };
    const key = this.activeKey(chatId);
    const mark = () => void publisher.set(key, messageId, { EX: ACTIVE_TTL_SECONDS }).catch(() => undefined);
    const replyKey = this.replyKey(messageId);
    const ownerKey = this.ownerKey(messageId);
    // The reply's own marker holds when it was admitted: which of two turns of a chat is the later.
    const admittedAt = performance.timeOrigin + performance.now();
    const alive = () => {
      markSettingUp();
      void publisher.set(replyKey, String(admittedAt), { EX: ACTIVE_TTL_SECONDS }).catch(() => undefined);
      if (this.listening) {
        void publisher.set(ownerKey, this.instanceId, { EX: ACTIVE_TTL_SECONDS }).catch(() => undefined);
      }
    };
    const reply: LocalReply = {
      chatId,
      messageId,
      stop,
      mark,
      released: new Promise<void>((resolve) => {
        release = resolve;
      }),
      settled: new Promise<void>((resolve) => {
        settle = resolve;
      }),
      shared: resumable
        ? new Promise<void>((resolve) => {
            settleShared = () => {
              resolve();
              endSetUp();
            };
          })
        : undefined,
    };
    this.replies.add(reply);
    this.local.set(chatId, reply);
    // Before the chat's marker, on the same connection: a process that finds the chat's marker
    // naming this reply finds its set-up marker too.
    alive();
    mark();
    // The chat's marker names its latest reply: an earlier turn still running must not put its
    // own id back over it (a resume would replay the wrong reply), here or on another process.
    // So a heartbeat renews it when it names this reply, or a reply admitted earlier or no longer
    // running (its own marker gone), or nothing: whatever put another id there (a write in flight,
    // the key lost), the latest running turn has it again within a heartbeat.
    // A later turn whose process seemed gone at the last heartbeat: taken over only if it still
    // seems gone at this one, as a process whose subscriber is reconnecting seems gone for a
    // moment (its marker taken then, stops and resumes would reach this earlier turn).
    let seemedGone: string | undefined;
    const renew = async () => {
      const named = await publisher.get(key);
      if (typeof named === 'string' && named !== messageId) {
        const theirs = await publisher.get(this.replyKey(named));
        // Admitted later than this one (a tie: the greater id, as both processes judge it).
        const later = Number(theirs) > admittedAt || (Number(theirs) === admittedAt && named > messageId);
        if (typeof theirs === 'string' && later) {
          // A later turn whose process was killed no longer runs: the chat is this turn's again.
          const gone = (await this.goneReplies([named])).has(named);
          const goneStill = gone && seemedGone === named;
          seemedGone = gone ? named : undefined;
          if (!goneStill) return;
        }
      }
      seemedGone = undefined;
      mark();
    };
    const heartbeat = setInterval(() => {
      alive();
      if (this.local.get(chatId) === reply) void renew().catch(() => undefined);
    }, HEARTBEAT_MS);
    heartbeat.unref();
    let released = false;
    return {
      share: async (sse) => {
        // resumable-stream reads `sse` itself, keeping its text for replays, and queues it again
        // in a copy meant for a first client. This reply's client gets the text straight from
        // the reply, so the copy is left unread: cancelling it would make the library catch a
        // thrown error for every piece. It holds the same strings as the replay text, and goes
        // with the reply. With Redis down its subscription waits for a connection: the reply's
        // own client waits at most SHARE_WAIT_MS for it, and the reply is then not resumable.
        let source: ReadableStream<string> | undefined = sse;
        const shared = this.streams
          .createNewResumableStream(
            messageId,
            () => source ?? new ReadableStream({ start: (c) => c.close() }),
          )
          .then(
            () => undefined,
            () => undefined,
          );
        if (!(await within(shared, SHARE_WAIT_MS))) {
          // Not kept for a registration that may come long after (ioredis queues it until Redis
          // is back): the reply's text would pile up in memory for every reply of the outage.
          source = undefined;
          void sse.cancel().catch(() => undefined);
        }
        settleShared();
      },
      release: () => {
        if (released) return;
        released = true;
        clearInterval(heartbeat);
        this.replies.delete(reply);
        if (this.local.get(chatId) === reply) {
          this.local.delete(chatId);
          // An earlier turn of the chat still running here becomes the one its state reports.
          for (const other of this.replies) if (other.chatId === chatId) this.local.set(chatId, other);
          this.local.get(chatId)?.mark();
        }
        const settledKey = this.settledKey(messageId);
        void (async () => {
          // Another reply of the chat may have started meanwhile: remove only our own marker.
          await publisher.del(replyKey);
          await publisher.del(ownerKey);
          await publisher.replace(key, messageId, null);
          // Last: a stop waiting for this reply on another process then finds the chat free.
          if (this.coordination.shared) {
            await publisher.set(settledKey, '1', { EX: SETTLED_TTL_SECONDS });
          }
        })()
          .catch(() => undefined)
          .finally(settle);
        settleShared();
        release();
      },
    };
  }

  /**
   * `admit`, refused with 409 `conflict` while a reply of the chat runs here or (as Redis tells)
   * in another process: for a door that must never answer one turn of a chat twice. The chat's
   * marker is claimed, not looked at and then set: of two requests reaching two processes at
   * once, one gets it (docs/openai.md, "A client that leaves"). Also a regenerate's or an
   * edit's (docs/chat.md, "Regenerate"), with its own `refusal` message: two of one chat sent to
   * two processes at once both passed the look at the marker before either set it, and the turn
   * was answered twice.
   */
  async admitAlone(
    chatId: string,
    messageId: string,
    stop: (reason: StopReason) => void,
    {
      resumable = false,
      refusal = 'A reply is being generated in this chat: wait for it, or stop it, before sending again',
    }: { resumable?: boolean; refusal?: string } = {},
  ): Promise<ReplyTicket> {
    // With Redis down, only the replies running here are known.
    const claimed = !this.local.has(chatId) && (await this.claimChat(chatId, messageId).catch(() => true));
    try {
      // Looked at again once the claim is done, in the same turn as the admission: with Redis
      // down, two requests of this process cannot both get through.
      if (!claimed || this.local.has(chatId)) {
        throw new ApiError('conflict', refusal, { chatId });
      }
      return this.admit(chatId, messageId, stop, { resumable });
    } catch (error) {
      // Not admitted (here already, or 503): a marker claimed for it would name no reply, and
      // refuse the chat's requests until it expired.
      if (claimed) {
        void this.coordination.publisher
          .replace(this.activeKey(chatId), messageId, null)
          .catch(() => undefined);
      }
      throw error;
    }
  }

  /**
   * Sets the chat's marker to this reply unless it names one that runs (here or in a process
   * that is alive): true when set. Set only while the marker still holds what was read, in one
   * step, so a claim of another process in between makes this one fail.
   */
  private async claimChat(chatId: string, messageId: string): Promise<boolean> {
    const { publisher } = this.coordination;
    const key = this.activeKey(chatId);
    const value = await publisher.get(key);
    const named = typeof value === 'string' && value !== '' ? value : null;
    if (named !== null && !(await this.goneReplies([named])).has(named)) return false;
    return publisher.replace(key, named, messageId, { EX: ACTIVE_TTL_SECONDS });
  }

  /**
   * The reply running for a chat here or in another process that is alive: its message id, or
   * null. Throws when Redis does not answer (stop and resume need it: a 503).
   */
  async runningMessageId(chatId: string): Promise<string | null> {
    const local = this.local.get(chatId);
    if (local) return local.messageId;
    const value = await this.coordination.publisher.get(this.activeKey(chatId));
    if (typeof value !== 'string' || value === '') return null;
    return (await this.goneReplies([value])).has(value) ? null : value;
  }

  /**
   * Whether a reply runs for the chat, for a chat's `active` flag: with Redis down, what runs
   * here (a read is not failed for a flag; a Redis outage fails only stop and resume across
   * processes).
   */
  async isActive(chatId: string): Promise<boolean> {
    return (await this.runningMessageId(chatId).catch(() => null)) !== null;
  }

  /** Stops the replies running for a chat here, or the chat's latest reply wherever it runs. */
  async stop(
    chatId: string,
    reason: StopReason = 'stopped',
  ): Promise<{ stopped: boolean; messageId: string | null }> {
    const local = this.local.get(chatId);
    if (local) {
      for (const reply of this.replies) if (reply.chatId === chatId) reply.stop(reason);
      return { stopped: true, messageId: local.messageId };
    }
    const messageId = await this.runningMessageId(chatId);
    if (!messageId) return { stopped: false, messageId: null };
    await this.coordination.publisher.publish(
      this.stopChannel,
      // A deletion travels as a stop with a flag, not as a reason of its own: a process of an
      // older version (a rolling deploy) then still ends that reply as a stop.
      JSON.stringify(
        reason === 'deleted'
          ? { chatId, messageId, reason: 'stopped', deleted: true }
          : { chatId, messageId, reason },
      ),
    );
    return { stopped: true, messageId };
  }

  /**
   * `stop` (as `POST /chat/{chatId}/stop`), answered once the stopped replies are stored and
   * released, wherever they ran: a client reading the chat right after sees the stopped reply,
   * and its next turn is not refused as busy. Here, the replies' own settlement; on another
   * process, its settled marker or the reply's markers cleared (looked at every SETTLED_POLL_MS),
   * or that process gone. At most `waitMs`: `settled` false when the stop answers without knowing
   * the reply stored.
   */
  async stopAndWait(
    chatId: string,
    waitMs = this.options.stopWaitMs ?? STOP_WAIT_MS,
  ): Promise<{ stopped: boolean; messageId: string | null; settled: boolean }> {
    const here = [...this.replies].filter((reply) => reply.chatId === chatId);
    const result = await this.stop(chatId, 'stopped');
    if (!result.stopped || result.messageId === null) return { ...result, settled: true };
    const settled =
      here.length > 0
        ? within(Promise.all(here.map((reply) => reply.settled)), waitMs)
        : this.settledElsewhere(chatId, result.messageId, waitMs);
    return { ...result, settled: await settled };
  }

  /**
   * Whether the reply running on another process was released there (or its process died) in
   * time: its settled marker written, or its own marker gone and the chat's no longer naming it.
   * The latter is what a release of a process of an earlier version leaves (a rolling deploy),
   * or one whose settled marker was not written (a Redis call of its release failing); without
   * it such a stop waited its whole bound, the reply long released. The three keys are read in
   * one round trip (MGET), as the settled marker alone was.
   */
  private async settledElsewhere(chatId: string, messageId: string, waitMs: number): Promise<boolean> {
    const { publisher } = this.coordination;
    const keys = [this.settledKey(messageId), this.replyKey(messageId), this.activeKey(chatId)];
    let waiting = true;
    const looking = (async () => {
      for (let look = 0; waiting; look++) {
        try {
          const [settled, own, named] = await publisher.getMany(keys);
          if (typeof settled === 'string') return;
          if (typeof own !== 'string' && named !== messageId) return;
          // A process killed meanwhile stores nothing more: nothing to wait for.
          if (look % GONE_CHECK_EVERY === 0 && (await this.goneReplies([messageId])).has(messageId)) return;
        } catch {
          // Redis not answering: looked at again until the bound, as for a slow store.
        }
        await new Promise((resolve) => setTimeout(resolve, SETTLED_POLL_MS));
      }
    })();
    try {
      return await within(looking, waitMs);
    } finally {
      waiting = false;
    }
  }

  /** The running reply's stream from its start, or null when no reply is being generated. */
  async resume(chatId: string): Promise<ReadableStream<string> | null> {
    const messageId = await this.runningMessageId(chatId);
    if (!messageId) return null;
    // A reply still being set up (files fetched, MCP servers connected) has no stream yet, though
    // the chat is active: the replay waits for it rather than answering that nothing runs, and the
    // client would never show the reply. Here, until it is shared or released; on another
    // process, until that process says so (bounded).
    const local = this.local.get(chatId);
    if (local?.messageId === messageId) {
      if (local.shared) await local.shared;
    } else if (this.coordination.shared) {
      await this.setUpElsewhere(messageId);
    }
    const replay = await this.replayOf(messageId);
    return replay && this.followed(chatId, messageId, replay);
  }

  /**
   * The reply's stream from its start, or null. resumable-stream gives up on the running process
   * when it has not answered the replay request within 1 s ("Timeout waiting for ack"): a process
   * gone, or one busy for that long (a loaded machine, a collection). While the reply's process is
   * still alive, it is asked again, up to REPLAY_ATTEMPTS times in all.
   */
  private async replayOf(messageId: string): Promise<ReadableStream<string> | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.streams.resumeExistingStream(messageId)) ?? null;
      } catch {
        if (attempt >= REPLAY_ATTEMPTS || this.replaysEnded) return null;
        const gone = await this.goneReplies([messageId]).catch(() => new Set([messageId]));
        if (gone.has(messageId)) return null;
      }
    }
  }

  /**
   * Waits while the reply is being set up on another process, for at most `setUpWaitMs`: until
   * that process tells that the set-up ended (its stream shared, or the turn refused), or, as
   * looked at every SET_UP_CHECK_MS (a message lost to a reconnect), its set-up marker is gone or
   * its process is (killed), or this process shuts down.
   */
  private async setUpElsewhere(messageId: string): Promise<void> {
    // Most resumes find a reply streaming already: no subscription for them.
    if (!(await this.settingUpElsewhere(messageId))) return;
    const deadline = Date.now() + (this.options.setUpWaitMs ?? DEFAULT_SET_UP_WAIT_MS);
    let wake!: () => void;
    const woken = new Promise<void>((resolve) => {
      wake = resolve;
    });
    const listened = this.listenForSetUp(messageId, wake);
    try {
      // Listening before looking again: an end told in between is not missed. A subscriber
      // reconnecting (Redis down) is not waited for longer than a look.
      await within(listened, SET_UP_CHECK_MS);
      while (!this.replaysEnded && (await this.settingUpElsewhere(messageId))) {
        const left = deadline - Date.now();
        if (left <= 0 || (await within(woken, Math.min(left, SET_UP_CHECK_MS)))) return;
      }
    } finally {
      this.stopListeningForSetUp(messageId, wake);
    }
  }

  /** Whether a reply is being set up on a process that is alive; false when Redis does not say. */
  private async settingUpElsewhere(messageId: string): Promise<boolean> {
    try {
      if (typeof (await this.coordination.publisher.get(this.setUpKey(messageId))) !== 'string') return false;
      return !(await this.goneReplies([messageId])).has(messageId);
    } catch {
      return false;
    }
  }

  /** One subscription per reply on this process, however many resumes wait for it. */
  private listenForSetUp(messageId: string, wake: () => void): Promise<void> {
    const waiters = this.setUpWaiters.get(messageId);
    if (waiters) {
      waiters.add(wake);
      return Promise.resolve();
    }
    this.setUpWaiters.set(messageId, new Set([wake]));
    return Promise.resolve(
      this.coordination.subscriber.subscribe(this.setUpChannel(messageId), () => {
        for (const waiter of this.setUpWaiters.get(messageId) ?? []) waiter();
      }),
    )
      .then(() => undefined)
      .catch(() => undefined);
  }

  private stopListeningForSetUp(messageId: string, wake: () => void): void {
    const waiters = this.setUpWaiters.get(messageId);
    if (!waiters) return;
    waiters.delete(wake);
    if (waiters.size > 0) return;
    this.setUpWaiters.delete(messageId);
    void Promise.resolve(this.coordination.subscriber.unsubscribe(this.setUpChannel(messageId))).catch(
      () => undefined,
    );
  }

  /**
   * A replay that also ends when its reply no longer runs anywhere, though no end came (the
   * process generating it died: the reply's own marker lapses 30 s later; checked twice, a
   * heartbeat apart, so a reply that just ended delivers its last pieces first), and when this
   * process shuts down while the reply runs elsewhere. Otherwise its client, and this process's
   * shutdown, would wait on it for ever.
   */
  private followed(
    chatId: string,
    messageId: string,
    replay: ReadableStream<string>,
  ): ReadableStream<string> {
    const reader = replay.getReader();
    let end!: () => void;
    const ended = new Promise<{ done: true; value?: undefined }>((resolve) => {
      end = () => resolve({ done: true });
    });
    const follower = { messageId, end: () => end() };
    this.replays.add(follower);
    if (this.replaysEnded) end();
    let misses = 0;
    const watch = setInterval(() => {
      // The reply's own marker, not the chat's: a later turn of the chat, here or elsewhere,
      // names the chat's, and says nothing of whether this reply's process is alive.
      const { publisher } = this.coordination;
      void (async () => {
        // A process of an earlier version sets no reply marker, only the chat's.
        const running =
          (typeof (await publisher.get(this.replyKey(messageId))) === 'string' ||
            (await publisher.get(this.activeKey(chatId))) === messageId) &&
          !(await this.goneReplies([messageId])).has(messageId);
        misses = running ? 0 : misses + 1;
        if (misses >= 2) end();
      })().catch(() => undefined);
    }, HEARTBEAT_MS);
    watch.unref();
    const stopFollowing = () => {
      clearInterval(watch);
      this.replays.delete(follower);
    };
    return new ReadableStream<string>({
      async pull(controller) {
        const next = await Promise.race([reader.read(), ended]);
        if (!next.done) return controller.enqueue(next.value);
        stopFollowing();
        controller.close();
        await reader.cancel().catch(() => undefined);
      },
      async cancel(reason) {
        stopFollowing();
        await reader.cancel(reason);
      },
    });
  }

  /**
   * Resolves once every reply running on this process now has been stored and released: a
   * streamed reply is stored after its response ends, so this is when its rows are readable.
   */
  async idle(): Promise<void> {
    await Promise.all([...this.replies].map((reply) => reply.released));
  }

  /** Which of these chats have a reply being generated: one lookup for those not running here. */
  async activeChats(chatIds: string[]): Promise<Set<string>> {
    const active = new Set<string>();
    // Without shared coordination, every reply running anywhere runs here: no keys to build
    // and look up for each listed chat (issue 16).
    if (!this.coordination.shared) {
      if (this.local.size > 0) for (const chatId of chatIds) if (this.local.has(chatId)) active.add(chatId);
      return active;
    }
    const elsewhere: string[] = [];
    for (const chatId of chatIds) {
      if (this.local.has(chatId)) active.add(chatId);
      else elsewhere.push(chatId);
    }
    // With Redis down, the replies running here (as isActive).
    const values = await this.coordination.publisher
      .getMany(elsewhere.map((id) => this.activeKey(id)))
      .catch(() => [] as unknown[]);
    const named = new Map<string, string>();
    values.forEach((value, i) => {
      if (typeof value === 'string' && value !== '') named.set(elsewhere[i]!, value);
    });
    const gone = await this.goneReplies([...named.values()]).catch(() => new Set<string>());
    for (const [chatId, messageId] of named) if (!gone.has(messageId)) active.add(chatId);
    return active;
  }

  /**
   * Shutdown: lets replies run up to `waitMs`, then interrupts the rest (they are stored as
   * interrupted) and waits up to `storeMs` for them to be stored.
   */
  async drain(waitMs: number, storeMs: number): Promise<void> {
    this.draining = true;
    // Replays of the replies running here end with them (their last pieces and [DONE] included).
    const own = new Set([...this.replies].map((reply) => reply.messageId));
    const allReleased = () => Promise.all([...this.replies].map((reply) => reply.released));
    if (this.replies.size > 0 && !(await within(allReleased(), waitMs))) {
      for (const reply of this.replies) reply.stop('interrupted');
      await within(allReleased(), storeMs);
    }
    // Replays of replies running elsewhere end here; their clients resume through another process.
    this.replaysEnded = true;
    for (const replay of this.replays) if (!own.has(replay.messageId)) replay.end();
    // Resumes waiting for a reply set up elsewhere stop waiting; their replay ends at once.
    for (const waiters of this.setUpWaiters.values()) for (const wake of waiters) wake();
  }
}

/**
 * A coordination client for resumable-stream, whose calls never reject: its read loop and its
 * request listener do not handle a rejection, so a Redis error there (Redis gone mid-reply)
 * would be an unhandled rejection, which ends the process. A failed call leaves a reply not
 * resumable, nothing more; Atrium's own calls (stop, markers) use the client as it is.
 */
function neverRejecting<T extends object>(client: T): T {
  return new Proxy(client, {
    get(target, name, receiver) {
      const value: unknown = Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) =>
        Promise.resolve()
          .then(() => (value as (...a: unknown[]) => unknown).apply(target, args))
          .catch(() => null);
    },
  });
}

/** How long a resume waits for a reply set up on another process, unless told otherwise. */
const DEFAULT_SET_UP_WAIT_MS = 120_000;
/** How often such a resume looks again (a message missed, the process killed). */
const SET_UP_CHECK_MS = 1_000;

/** How long a streamed reply's first byte waits for its resumable copy to be registered. */
const SHARE_WAIT_MS = 1_000;
/** Replay requests a resume sends to a running process that is alive but slow to answer. */
const REPLAY_ATTEMPTS = 3;

/** True when the promise settled within `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
