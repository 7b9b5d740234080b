/**
 * A daemon running in-process, as the controller's Daemon call runs it: its log lines and
 * events as they come, its patch and exit when it ends. Stop it with `stop()` (the
 * controller's StopDaemon) or an AbortSignal (the controller going away).
 */
import { delayOf, harnessOf, logsOf, outcomeOf, type CallOptions, type HandlerRef, type LogRecord, type Outcome } from "./harness";
import type { Body, Resource } from "../kwargs";
import type { EventSpec } from "../context";
import type { DaemonMessage } from "../generated/bosun/v1/DaemonMessage";

/** How a daemon ended. */
export interface DaemonExit {
  outcome: Outcome;
  message: string;
  delay: number | undefined;
  /** Whether it ended after being asked to stop. */
  stopped: boolean;
  /** The merge patch it made of the object; undefined when none. */
  patch: Record<string, any> | undefined;
}

/** What a daemon gets besides the handler's own options. */
export interface DaemonInput {
  /** The object; default `{}`. */
  body?: Body;
  /** Restarts after temporary errors so far; default 0. */
  retry?: number;
  resource?: Partial<Resource>;
  /** Aborting it cancels the call, as a controller that goes away does. */
  signal?: AbortSignal;
}

/** A running daemon. */
export class DaemonRun {
  readonly logs: LogRecord[] = [];
  readonly events: EventSpec[] = [];
  /** Resolves with the exit once the daemon returned or threw. */
  readonly exit: Promise<DaemonExit>;
  private patch: Record<string, any> | undefined;
  private readonly waiters = new Set<() => void>();
  private readonly cancel = new AbortController();
  private ended = false;

  constructor(private readonly stopFn: () => boolean, start: (send: (m: DaemonMessage) => void, cancelled: AbortSignal) => Promise<void>, signal?: AbortSignal) {
    if (signal?.aborted) this.cancel.abort();
    signal?.addEventListener("abort", () => this.cancel.abort(), { once: true });
    let exit: DaemonExit | undefined;
    const send = (m: DaemonMessage) => {
      if (m.log) this.logs.push(...logsOf([m.log]));
      if (m.event) this.events.push({ type: m.event.type ?? "", reason: m.event.reason ?? "", message: m.event.message ?? "" });
      if (m.merge_patch) this.patch = JSON.parse(Buffer.from(m.merge_patch as Uint8Array).toString("utf8"));
      if (m.exit) {
        exit = {
          outcome: outcomeOf(m.exit.outcome), message: m.exit.message ?? "",
          delay: delayOf(m.exit.delay_seconds), stopped: !!m.exit.stopped, patch: this.patch,
        };
      }
      this.notify();
    };
    this.exit = start(send, this.cancel.signal).then(() => {
      this.ended = true;
      this.notify();
      if (!exit) throw new Error("bosun testing: the daemon's call ended without an exit");
      return exit;
    });
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  /** Asks the daemon to stop (its `stopped` signal), as the controller's StopDaemon; false
   * when it is not running. Await `exit` for its end. */
  stop(): boolean {
    return this.stopFn();
  }

  /** Cancels the call, as a controller that goes away does (also aborts `stopped`). */
  abort(): void {
    this.cancel.abort();
  }

  /** Waits until a log line contains `text` (or matches it); fails after `timeoutMs`
   * (default 10 s) or when the daemon ended first, with its lines so far. */
  waitFor(text: string | RegExp, { timeoutMs = 10_000 }: { timeoutMs?: number } = {}): Promise<LogRecord> {
    const match = (l: LogRecord) => (typeof text === "string" ? l.message.includes(text) : text.test(l.message));
    return new Promise((resolve, reject) => {
      const finish = (fn: () => void) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        fn();
      };
      const lines = () => this.logs.map((l) => `  ${l.level}: ${l.message}`).join("\n") || "  (none)";
      const check = () => {
        const found = this.logs.find(match);
        if (found) return finish(() => resolve(found));
        if (this.ended) finish(() => reject(new Error(`the daemon ended before logging ${String(text)}; its lines:\n${lines()}`)));
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`the daemon did not log ${String(text)} within ${timeoutMs} ms; its lines:\n${lines()}`))), timeoutMs);
      this.waiters.add(check);
      check();
    });
  }
}

/** Starts a daemon in-process; stop it with `stop()` or `input.signal`, then await `exit`. */
export function daemon(ref: HandlerRef, input: DaemonInput = {}, options: CallOptions = {}): DaemonRun {
  const harness = harnessOf(options);
  const handler = harness.find(ref, ["daemon"]);
  let body: Buffer;
  try {
    body = Buffer.from(JSON.stringify(input.body ?? {}));
  } catch (e) {
    throw new TypeError(`bosun testing: the body is not JSON-serialisable: ${(e as Error).message}`);
  }
  const uid = String(input.body?.metadata?.uid ?? "");
  const stop = () => harness.servicer.stopDaemon({ handler_id: handler.id, handler_key: handler.key, uid }).stopping;
  const resource = input.resource ? { group: "", version: "", plural: "", kind: "", namespaced: false, ...input.resource } : null;
  return new DaemonRun(stop, (send, cancelled) => harness.servicer.daemon(
    { handler_id: handler.id, handler_key: handler.key, object: body, retry: input.retry ?? 0, memo: Buffer.alloc(0), resource },
    send, cancelled,
  ), input.signal);
}
