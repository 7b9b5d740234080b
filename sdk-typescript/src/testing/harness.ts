/**
 * In-process calls of handlers, without a controller or a cluster, for unit tests: each call is
 * turned into the request the controller would send and answered by the same `Servicer` the
 * gRPC server uses (routing, predicate filters, kwargs, errors as outcomes, patches, log lines,
 * events, owned objects, sub-handlers), then read back as plain values.
 *
 * ```ts
 * const got = await testing.call("create_fn", { body }, { registry });
 * assert.equal(got.outcome, "success");
 * assert.deepEqual(got.result, { message: "hello world" });
 * ```
 */
import { defaultRegistry, type Handler, type Kind, type Registry } from "../registry";
import { Servicer } from "../servicer";
import type { Body, DiffItem, Resource } from "../kwargs";
import type { EventSpec } from "../context";
import type { HandleRequest__Output as HandleRequest } from "../generated/bosun/v1/HandleRequest";
import type { Outcome as ContractOutcome } from "../generated/bosun/v1/Outcome";
import type { Reason } from "../generated/bosun/v1/Reason";
import type { LogLine } from "../generated/bosun/v1/LogLine";
import type { Event } from "../generated/bosun/v1/Event";
import type { OperatorSettings } from "../generated/bosun/v1/OperatorSettings";

/** How a call ended. */
export type Outcome = "success" | "temporary" | "permanent" | "skipped" | "unexpected";

const OUTCOMES: Record<string, Outcome> = {
  OUTCOME_SUCCESS: "success", OUTCOME_TEMPORARY_ERROR: "temporary", OUTCOME_PERMANENT_ERROR: "permanent",
  OUTCOME_SKIPPED: "skipped", OUTCOME_UNEXPECTED_ERROR: "unexpected",
};

/** The contract's outcome as a test reads it. */
export function outcomeOf(outcome: ContractOutcome | undefined): Outcome {
  return OUTCOMES[String(outcome)] ?? "unexpected";
}

/** A delay in seconds, undefined when none. */
export function delayOf(seconds: number | string | undefined | null): number | undefined {
  return seconds === undefined || seconds === null ? undefined : Number(seconds);
}

/** Why a resource handler is called (Kopf's `reason`). */
export type CallReason = "create" | "update" | "delete" | "resume" | "event" | "timer" | "index";

const REASONS: Record<CallReason, Reason> = {
  create: "REASON_CREATE", update: "REASON_UPDATE", delete: "REASON_DELETE", resume: "REASON_RESUME",
  event: "REASON_EVENT", timer: "REASON_TIMER", index: "REASON_INDEX",
};

/** The reason a handler of each kind is called for, unless the call says otherwise. */
const DEFAULT_REASON: Partial<Record<Kind, CallReason>> = {
  create: "create", update: "update", delete: "delete", resume: "resume", field: "update",
  event: "event", timer: "timer", index: "index",
};

/** The kinds each reason calls (as the servicer routes a call without a handler key). */
const KINDS_OF_REASON: Record<CallReason, readonly Kind[]> = {
  create: ["create", "field"], update: ["update", "field"], delete: ["delete"], resume: ["resume"],
  event: ["event"], timer: ["timer"], index: ["index"],
};

const ACTIVITIES: readonly Kind[] = ["startup", "cleanup", "probe"];
const ADMISSION: readonly Kind[] = ["validate", "mutate"];

/** A handler: its id (`parent/child` for a sub-handler, `id/field` for a field handler), or
 * the registered function itself. */
export type HandlerRef = string | ((kwargs: any) => unknown);

/** What the controller tells a resource handler; everything is optional. Values go through
 * JSON, as they do over the wire, so the handler gets copies. */
export interface CallInput {
  /** The object; default `{}`. */
  body?: Body;
  /** Default: what the handler's kind is called for (create → "create", field → "update"…). */
  reason?: CallReason;
  old?: unknown;
  new?: unknown;
  diff?: DiffItem[];
  /** Failed attempts before this one; default 0. */
  retry?: number;
  /** When the first attempt started (`runtime` follows from it). */
  started?: Date;
  /** The parameter the controller sends (a sub-handler's, from its parent's answer). */
  param?: unknown;
  /** Event handlers: the watch event's type (ADDED, MODIFIED, DELETED). */
  eventType?: string;
  resource?: Partial<Resource>;
  traceparent?: string;
}

/** A log line of a call. */
export interface LogRecord {
  level: "info" | "debug" | "warning" | "error";
  message: string;
}

/** A call's answer as plain values. */
export interface CallResult {
  outcome: Outcome;
  /** The error's message (an unexpected error's stack), or why it was skipped; "" on success. */
  message: string;
  /** Seconds before the next attempt, from `TemporaryError`'s `delay`; undefined when none. */
  delay: number | undefined;
  /** What the handler returned (through JSON); undefined when nothing. */
  result: unknown;
  /** The merge patch the handler made of the object; undefined when none. */
  patch: Record<string, any> | undefined;
  logs: LogRecord[];
  events: EventSpec[];
  /** Objects for the controller to create and adopt (`bosun.own`). */
  owned: { object: Record<string, any>; apply: boolean; copyLabels: boolean }[];
  /** Sub-handlers the handler declared: call them as `testing.call("parent/child", …)`. */
  subhandlers: { id: string; param: unknown }[];
  /** Startup handlers: the operator settings they changed, as the contract carries them. */
  settings?: OperatorSettings;
}

/** An admission handler's verdict. */
export interface Verdict {
  allowed: boolean;
  message: string;
  /** The HTTP code of a denial. */
  code: number | undefined;
  /** Mutating handlers: the merge patch of the object. */
  patch: Record<string, any> | undefined;
  warnings: string[];
}

/** Where a call finds its handlers. */
export interface CallOptions {
  /** Default: the registry `bosun.on.*` registers into. */
  registry?: Registry;
  /** Calls through this harness (its memos, indices and daemons), instead of a fresh one. */
  harness?: Harness;
}

/** JSON bytes of a test's value; a clear error when it is not JSON. */
function encode(value: unknown, what: string): Buffer {
  if (value === undefined) return Buffer.alloc(0);
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new TypeError(`bosun testing: ${what} is not JSON-serialisable: ${(e as Error).message}`);
  }
  if (text === undefined) throw new TypeError(`bosun testing: ${what} is not JSON-serialisable (${typeof value})`);
  return Buffer.from(text);
}

function decode(data: Uint8Array | undefined): any {
  return data && data.length ? JSON.parse(Buffer.from(data).toString("utf8")) : undefined;
}

export function logsOf(lines: LogLine[] | undefined): LogRecord[] {
  return (lines ?? []).map((l) => ({ level: String(l.level).replace("LEVEL_", "").toLowerCase() as LogRecord["level"], message: l.message ?? "" }));
}

function eventsOf(events: Event[] | undefined): EventSpec[] {
  return (events ?? []).map((e) => {
    const event: EventSpec = { type: e.type ?? "", reason: e.reason ?? "", message: e.message ?? "" };
    if (e.regarding) event.regarding = e.regarding as EventSpec["regarding"];
    return event;
  });
}

const DIFF_OPS = { add: "OPERATION_ADD", change: "OPERATION_CHANGE", remove: "OPERATION_REMOVE" } as const;

/** Calls one operator's handlers in-process, keeping what a handler server keeps between
 * calls (memos per object, indices, running daemons). It counts as described, as after the
 * controller's first call. */
export class Harness {
  readonly servicer: Servicer;

  constructor(readonly registry: Registry = defaultRegistry()) {
    this.servicer = new Servicer(registry, "testing");
    this.servicer.describe();
  }

  /** The registered handler `ref` names; a clear error when there is none. */
  find(ref: HandlerRef, kinds?: readonly Kind[]): Handler {
    const fits = (h: Handler) => !kinds || kinds.includes(h.kind);
    const handler = typeof ref === "function"
      ? this.registry.handlers.find((h) => h.fn === ref && fits(h))
      : this.registry.handlers.find((h) => h.id === ref && fits(h));
    if (handler) return handler;
    const known = this.registry.handlers.map((h) => `${h.id} (${h.kind})`).join(", ") || "none";
    const what = typeof ref === "function" ? `the function ${ref.name ? `"${ref.name}"` : "(anonymous)"}` : `the id ${JSON.stringify(ref)}`;
    const among = kinds ? ` among its ${kinds.join("/")} handlers` : "";
    throw new Error(`bosun testing: no handler with ${what}${among} in the registry; it has: ${known}`);
  }

  /** One attempt of a resource handler (or a sub-handler, `parent/child`); activities
   * (startup/probe/cleanup) are run as `activity` does. Admission handlers and daemons have
   * `admit` and `daemon`. */
  async call(ref: HandlerRef, input: CallInput = {}): Promise<CallResult> {
    const [handler, parent, child] = this.resolve(ref, input.reason);
    if (ACTIVITIES.includes(handler.kind)) return this.activity(handler.fn, { retry: input.retry });
    if (ADMISSION.includes(handler.kind)) throw new Error(`bosun testing: "${handler.id}" is a ${handler.kind} handler: use testing.admit()`);
    if (handler.kind === "daemon") throw new Error(`bosun testing: "${handler.id}" is a daemon: use testing.daemon()`);
    const reason = input.reason ?? DEFAULT_REASON[handler.kind] ?? "create";
    if (!(reason in REASONS)) throw new Error(`bosun testing: unknown reason ${JSON.stringify(reason)}; one of: ${Object.keys(REASONS).join(", ")}`);
    if (input.retry !== undefined && !(Number.isInteger(input.retry) && input.retry >= 0)) throw new Error(`bosun testing: retry must be a whole number >= 0, not ${input.retry}`);
    const started = input.started;
    const runtime = started ? Math.max(0, (Date.now() - started.getTime()) / 1000) : undefined;
    const request: HandleRequest = {
      handler_id: child === undefined ? handler.id : `${parent}/${child}`,
      handler_key: handler.key,
      parent_id: parent ?? "", subhandler_id: child ?? "",
      reason: REASONS[reason] as HandleRequest["reason"],
      resource: input.resource ? { group: "", version: "", plural: "", kind: "", namespaced: false, ...input.resource } : null,
      object: encode(input.body ?? {}, "the body"),
      old: encode(input.old, "old"), new: encode(input.new, "new"),
      diff: (input.diff ?? []).map((d) => ({ operation: DIFF_OPS[d.op] ?? "OPERATION_CHANGE", path: [...d.path], old: encode(d.old, "a diff's old"), new: encode(d.new, "a diff's new") })),
      retry: input.retry ?? 0,
      started: started ? { seconds: Math.floor(started.getTime() / 1000), nanos: (started.getTime() % 1000) * 1e6 } : null,
      runtime: runtime === undefined ? null : { seconds: Math.floor(runtime), nanos: Math.round((runtime % 1) * 1e9) },
      param: encode(input.param, "the param"), memo: Buffer.alloc(0),
      event_type: input.eventType ?? "", finished_subhandlers: [],
    };
    const response = await this.servicer.handle(request, input.traceparent);
    return {
      outcome: outcomeOf(response.outcome),
      message: response.message ?? "",
      delay: delayOf(response.delay_seconds),
      result: decode(response.result as Uint8Array),
      patch: decode(response.merge_patch as Uint8Array),
      logs: logsOf(response.logs), events: eventsOf(response.events),
      owned: (response.owned ?? []).map((o) => ({ object: decode(o.object as Uint8Array), apply: !!o.apply, copyLabels: !!o.copy_labels })),
      subhandlers: (response.subhandlers ?? []).map((s) => ({ id: s.id ?? "", param: decode(s.param as Uint8Array) })),
    };
  }

  /** The handler, and for `parent/child` ids of sub-handlers the parent's id and the child's. */
  private resolve(ref: HandlerRef, reason?: CallReason): [Handler, string?, string?] {
    if (typeof ref === "string" && !this.registry.handlers.some((h) => h.id === ref) && ref.includes("/")) {
      const at = ref.lastIndexOf("/");
      const routed = this.registry.route("", ref.slice(0, at));
      if (routed) return [routed[0], ref.slice(0, at), ref.slice(at + 1)];
    }
    // One id (or function) under several kinds: the one the reason calls, else the first.
    const kinds = reason ? KINDS_OF_REASON[reason] : undefined;
    const byReason = kinds && this.registry.handlers.find((h) => (typeof ref === "string" ? h.id === ref : h.fn === ref) && kinds.includes(h.kind));
    return [byReason || this.find(ref)];
  }

  /** One attempt of a startup, cleanup or probe handler. */
  async activity(ref: HandlerRef, input: { retry?: number } = {}): Promise<CallResult> {
    const handler = this.find(ref, ACTIVITIES);
    const response = await this.servicer.activity({ handler_id: handler.id, handler_key: handler.key, kind: `HANDLER_KIND_${handler.kind.toUpperCase()}` as any, retry: input.retry ?? 0 });
    const result: CallResult = {
      outcome: outcomeOf(response.outcome), message: response.message ?? "",
      delay: delayOf(response.delay_seconds), result: decode(response.result as Uint8Array), patch: undefined,
      logs: logsOf(response.logs), events: [], owned: [], subhandlers: [],
    };
    if (response.settings) result.settings = response.settings;
    return result;
  }

  /** One admission review: `request` is the AdmissionReview's `request` (`operation`,
   * `object`, `oldObject`, `userInfo`, `dryRun`…; `operation` defaults to CREATE). */
  async admit(ref: HandlerRef, request: Record<string, any> = {}, options: { headers?: Record<string, string> } = {}): Promise<Verdict> {
    const handler = this.find(ref, ADMISSION);
    const review = { operation: "CREATE", ...request };
    const response = await this.servicer.admit({ handler_id: handler.id, handler_key: handler.key, request: encode(review, "the admission request"), headers: options.headers ?? {} });
    return {
      allowed: !!response.allowed, message: response.message ?? "", code: response.code || undefined,
      patch: decode(response.merge_patch as Uint8Array), warnings: [...(response.warnings ?? [])],
    };
  }
}

/** One attempt of a handler through a fresh `Harness` (or `options.harness`). */
export function call(ref: HandlerRef, input: CallInput = {}, options: CallOptions = {}): Promise<CallResult> {
  return harnessOf(options).call(ref, input);
}

/** One attempt of a startup, cleanup or probe handler. */
export function activity(ref: HandlerRef, input: { retry?: number } = {}, options: CallOptions = {}): Promise<CallResult> {
  return harnessOf(options).activity(ref, input);
}

/** One admission review by a validating or mutating handler. */
export function admit(ref: HandlerRef, request: Record<string, any> = {}, options: CallOptions & { headers?: Record<string, string> } = {}): Promise<Verdict> {
  return harnessOf(options).admit(ref, request, options);
}

export function harnessOf(options: CallOptions): Harness {
  if (options.harness && options.registry && options.harness.registry !== options.registry) {
    throw new Error("bosun testing: give either a registry or a harness (of another registry), not both");
  }
  return options.harness ?? new Harness(options.registry);
}
