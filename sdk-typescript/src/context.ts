/**
 * What one call gathers besides its outcome (log lines, events, owned objects, sub-handlers)
 * and the helpers handlers call to add to it: `event`/`info`/`warn`/`exception`, `own`,
 * `adopt`, `subhandler`. The call in progress is found through an AsyncLocalStorage kept on
 * `globalThis`, so that a handler file importing another copy of the package reaches it too.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { HandlerOptionsInput } from "./registry";
import type { Json } from "./patch";

/** A log line's level, as the contract names it. */
export type Level = "LEVEL_INFO" | "LEVEL_DEBUG" | "LEVEL_WARNING" | "LEVEL_ERROR";

/** A Kubernetes event a handler asks to post. */
export interface EventSpec {
  type: string;
  reason: string;
  message: string;
  regarding?: { api_version: string; kind: string; namespace: string; name: string; uid: string };
}

/** An object the handled object should own (the contract's OwnedObject). */
export interface OwnedSpec {
  object: Record<string, any>;
  apply: boolean;
  copyLabels: boolean;
}

/** A sub-handler declared by its parent during a call. */
export interface SubhandlerDecl {
  id: string;
  fn: (kwargs: any) => unknown;
  param?: Json;
  options: HandlerOptionsInput;
}

/** What one call sends back besides its outcome. */
export class Collector {
  readonly logs: { level: Level; message: string }[] = [];
  readonly events: EventSpec[] = [];
  readonly owned: OwnedSpec[] = [];
  readonly subhandlers = new Map<string, SubhandlerDecl>();
  /** Set once the answer is sent: later lines (a handler's leftover promise) go to stderr. */
  sent = false;

  /** @param stream for daemons: sends each log line and event at once instead of keeping it. */
  constructor(
    readonly prefix = "",
    readonly stream?: (what: "log" | "event", item: any) => void,
  ) {}

  log(level: Level, message: string): void {
    if (this.stream) return this.stream("log", { level, message });
    if (this.sent) {
      process.stderr.write(`${level.slice("LEVEL_".length)} ${this.prefix}${message}\n`);
      return;
    }
    this.logs.push({ level, message });
  }

  event(event: EventSpec): void {
    if (this.stream) return this.stream("event", event);
    this.events.push(event);
  }
}

/** The call in progress, as the helpers see it. */
export interface CallContext {
  collector: Collector;
  /** The handled object (for `adopt`, and for events about another object). */
  body: Record<string, any>;
}

const STORE_KEY = Symbol.for("bosun-operator.call-context");
const store: AsyncLocalStorage<CallContext> = ((globalThis as any)[STORE_KEY] ??= new AsyncLocalStorage<CallContext>());

/** Runs `fn` as the call `context`. */
export function inCall<T>(context: CallContext, fn: () => T): T {
  return store.run(context, fn);
}

function current(what: string): CallContext {
  const context = store.getStore();
  if (context === undefined) throw new Error(`bosun.${what}() was called outside of a handler call`);
  return context;
}

/** A handler's logger: its lines go back with the answer, and the controller prints them
 * prefixed with the object's namespace/name. */
export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warning(message: string): void;
  warn(message: string): void;
  error(message: string): void;
  /** An error line with the error's stack. */
  exception(message: string, error?: unknown): void;
}

/** A logger writing into `collector`. */
export function loggerFor(collector: Collector): Logger {
  const text = (message: unknown) => (typeof message === "string" ? message : String(message));
  return {
    debug: (m) => collector.log("LEVEL_DEBUG", text(m)),
    info: (m) => collector.log("LEVEL_INFO", text(m)),
    warning: (m) => collector.log("LEVEL_WARNING", text(m)),
    warn: (m) => collector.log("LEVEL_WARNING", text(m)),
    error: (m) => collector.log("LEVEL_ERROR", text(m)),
    exception: (m, e) =>
      collector.log("LEVEL_ERROR", e instanceof Error && e.stack ? `${text(m)}\n${e.stack}` : text(m)),
  };
}

/** What an event says. */
export interface EventFields {
  type?: string;
  reason: string;
  message?: string;
}

/** Posts a Kubernetes event about `body` (the handled object, or another one) — Kopf's
 * `kopf.event()`. Only within a handler call. */
export function event(body: Record<string, any> | Record<string, any>[], fields: EventFields & { type: string }): void {
  const context = current("event");
  for (const obj of Array.isArray(body) ? body : [body]) {
    const spec: EventSpec = { type: fields.type, reason: fields.reason, message: (fields.message ?? "").slice(0, 1024) };
    const regarding = referenceUnlessHandled(obj, context.body);
    if (regarding) spec.regarding = regarding;
    context.collector.event(spec);
  }
}

/** A `Normal` event (Kopf's `kopf.info()`). */
export function info(body: Record<string, any>, fields: EventFields): void {
  event(body, { ...fields, type: "Normal" });
}

/** A `Warning` event (Kopf's `kopf.warn()`). */
export function warn(body: Record<string, any>, fields: EventFields): void {
  event(body, { ...fields, type: "Warning" });
}

/** An `Error` event with the error's message appended (Kopf's `kopf.exception()`). */
export function exception(body: Record<string, any>, fields: EventFields & { error?: unknown }): void {
  const detail = fields.error instanceof Error ? `${fields.error.name}: ${fields.error.message}` : "";
  const message = [fields.message ?? "", detail].filter(Boolean).join(" ");
  event(body, { reason: fields.reason, message, type: "Error" });
}

function referenceUnlessHandled(obj: Record<string, any>, handled: Record<string, any>): EventSpec["regarding"] {
  const meta = obj?.metadata ?? {};
  const uid = meta.uid ?? "";
  if (obj === handled || !uid || uid === handled?.metadata?.uid) return undefined;
  return { api_version: obj.apiVersion ?? "", kind: obj.kind ?? "", namespace: meta.namespace ?? "", name: meta.name ?? "", uid };
}

/** Options of an owned object. */
export interface OwnOptions {
  /** Create it with server-side apply (updates on a re-run instead of failing). */
  apply?: boolean;
  /** Copy the owner's labels onto it. */
  copyLabels?: boolean;
}

/** Has the controller create `object` (with apiVersion and kind) and adopt it as a child of
 * the handled object: it adds the ownerReference, the namespace and, when unnamed, the name
 * `<owner>-<kind>`. Only within a handler call; sent with a successful outcome only. */
export function own(object: Record<string, any>, options: OwnOptions = {}): void {
  current("own").collector.owned.push({ object, apply: !!options.apply, copyLabels: !!options.copyLabels });
}

/** Makes `object` a child of `owner` (default: the handled object) in place, as Kopf's
 * `kopf.adopt()`: an ownerReference, the owner's namespace, a generateName from the owner's
 * name when unnamed, and the owner's labels. It creates nothing (see `own` for that). */
export function adopt<T extends Record<string, any>>(object: T, owner?: Record<string, any>): T {
  const parent = owner ?? current("adopt").body;
  const meta = ((object as any).metadata ??= {});
  const pmeta = parent.metadata ?? {};
  const ref = { apiVersion: parent.apiVersion, kind: parent.kind, name: pmeta.name, uid: pmeta.uid, controller: true, blockOwnerDeletion: true };
  meta.ownerReferences = [...(meta.ownerReferences ?? []).filter((r: any) => r.uid !== ref.uid), ref];
  if (pmeta.namespace && !meta.namespace) meta.namespace = pmeta.namespace;
  if (!meta.name && !meta.generateName && pmeta.name) meta.generateName = `${pmeta.name}-`;
  meta.labels = { ...(pmeta.labels ?? {}), ...(meta.labels ?? {}) };
  return object;
}

/** Declares a sub-handler of the running handler (Kopf's `@kopf.subhandler`): recorded as
 * `<parent>/<id>` with its own progress and called, with `param`, in this and later cycles.
 * The parent runs again, without effect, to find the sub-handler's code: declare the same
 * ids on every run, and keep side effects out of the parent's body. */
export function subhandler(id: string, fn: (kwargs: any) => unknown, options: HandlerOptionsInput & { param?: Json } = {}): void {
  const { param, ...rest } = options;
  current("subhandler").collector.subhandlers.set(id, { id, fn, param, options: rest });
}
