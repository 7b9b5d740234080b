/**
 * The registry of handlers and its translation into the contract's `HandlerSpec`s (Describe).
 * Pure: no I/O. The default registry lives on `globalThis`, so that handler files importing
 * another copy of the package (an installed tarball beside the CLI's own) register into the
 * one the CLI serves.
 */
import type { HandlerSpec } from "./generated/bosun/v1/HandlerSpec";
import type { HandlerOptions } from "./generated/bosun/v1/HandlerOptions";
import type { ValueFilter } from "./generated/bosun/v1/ValueFilter";
import type { Filters } from "./generated/bosun/v1/Filters";
import type { HandlerKind } from "./generated/bosun/v1/HandlerKind";
import type { ResourceSettings } from "./generated/bosun/v1/ResourceSettings";

/** A filter matching any present value (`labels: { app: bosun.PRESENT }`). */
export const PRESENT: unique symbol = Symbol.for("bosun-operator.PRESENT") as any;
/** A filter matching an absent value. */
export const ABSENT: unique symbol = Symbol.for("bosun-operator.ABSENT") as any;

/** A condition on a value: equality with a JSON value, presence, absence, or a predicate
 * evaluated in this server (`(value, kwargs) => boolean`). */
export type ValueCondition = unknown;

/** Handler kinds, as Kopf names them. */
export type Kind =
  | "create" | "update" | "delete" | "resume" | "field" | "event" | "timer" | "daemon" | "index"
  | "startup" | "cleanup" | "probe" | "validate" | "mutate";

/** What unexpected errors of a handler mean (Kopf's `ErrorsMode`). */
export type ErrorsMode = "temporary" | "permanent" | "ignored";

/** Retries, backoff, timeout and the like: also the options of a sub-handler. */
export interface HandlerOptionsInput {
  /** Maximum number of attempts; unset: unlimited. */
  retries?: number;
  /** Seconds before retrying an unexpected failure; unset: 60. */
  backoff?: number;
  /** Seconds since the first attempt after which the handler fails for good. */
  timeout?: number;
  /** What unexpected errors mean; default "temporary". */
  errors?: ErrorsMode;
  /** Seconds one call may take; unset: 300. */
  callTimeout?: number;
}

/** The options every resource handler takes. */
export interface RegisterOptions extends HandlerOptionsInput {
  /** The id the controller records the handler under; default: the function's name. */
  id?: string;
  /** Label key → condition (a string equals, `PRESENT`, `ABSENT`, or a predicate). */
  labels?: Record<string, ValueCondition>;
  /** Annotation key → condition. */
  annotations?: Record<string, ValueCondition>;
  /** A predicate of the call's kwargs; when false the handler is skipped. */
  when?: (kwargs: any) => boolean;
  /** Dotted path of a field: the field a field/update handler watches, or what `value` checks. */
  field?: string;
  /** Condition on the value at `field`. */
  value?: ValueCondition;
  /** For update/field handlers: condition on the old value. */
  old?: ValueCondition;
  /** For update/field handlers: condition on the new value. */
  new?: ValueCondition;
  /** A value passed to the handler as `param`. */
  param?: unknown;
  /** For delete handlers: no finalizer (best effort only). */
  optional?: boolean;
  /** For resume handlers: also resume objects being deleted. */
  deleted?: boolean;
  /** Timers: seconds between calls. Required for timers. */
  interval?: number;
  /** Timers: only call when the object did not change for this many seconds. */
  idle?: number;
  /** Timers and daemons: seconds after the object is first seen before the first call. */
  initialDelay?: number;
  /** Timers: keep a strict schedule. */
  sharp?: boolean;
  /** Daemons: seconds the daemon gets to exit after being stopped before it is abandoned. */
  cancellationTimeout?: number;
  /** Admission: operations reviewed (CREATE, UPDATE, DELETE, CONNECT); default all. */
  operations?: string[];
  /** Admission: subresources reviewed (`"*"` for all); default the main resource only. */
  subresources?: string[];
  /** Admission: the handler has side effects. */
  sideEffects?: boolean;
  /** Admission: a failing handler denies the request. */
  failClosed?: boolean;
}

/** Names a resource: a name as `kubectl get NAME` takes it (`kopfexamples`,
 * `kopf.dev/v1/kopfexamples`), or its parts. */
export type ResourceInput = string | { group?: string; version?: string; plural?: string; name?: string };

/** One registered handler. */
export interface Handler {
  id: string;
  kind: Kind;
  key: string;
  fn: (kwargs: any) => unknown;
  resource?: { group: string; version: string; name: string };
  options: RegisterOptions;
  /** Conditions only this server can check (predicates), by filter name. */
  localChecks: [string, (value: unknown, kwargs: any) => boolean][];
}

const KINDS: Record<Kind, HandlerKind> = {
  create: "HANDLER_KIND_CREATE", update: "HANDLER_KIND_UPDATE", delete: "HANDLER_KIND_DELETE",
  resume: "HANDLER_KIND_RESUME", field: "HANDLER_KIND_FIELD", event: "HANDLER_KIND_EVENT",
  timer: "HANDLER_KIND_TIMER", daemon: "HANDLER_KIND_DAEMON", index: "HANDLER_KIND_INDEX",
  startup: "HANDLER_KIND_STARTUP", cleanup: "HANDLER_KIND_CLEANUP", probe: "HANDLER_KIND_PROBE",
  validate: "HANDLER_KIND_VALIDATE", mutate: "HANDLER_KIND_MUTATE",
};

/** A resource as the contract selects it. */
export interface Selector {
  group: string;
  version: string;
  name: string;
}

/** The registered handlers, in registration order. */
export class Registry {
  readonly handlers: Handler[] = [];
  /** Each resource with the kinds its handlers create as owned children (`owns`), in
   * declaration order. */
  readonly owned: { resource: Selector; kinds: Selector[] }[] = [];

  /** Registers `fn` as a handler of `kind`; returns `fn`. Throws on options the contract
   * cannot carry, at registration rather than when the controller calls. */
  register<F extends (kwargs: any) => unknown>(kind: Kind, resource: ResourceInput | undefined, fn: F, options: RegisterOptions = {}): F {
    if (typeof fn !== "function") throw new TypeError(`bosun.on.${kind}: the handler must be a function`);
    const base = options.id ?? fn.name;
    if (!base) throw new Error(`bosun.on.${kind}: an anonymous function needs an id: give { id: "..." }`);
    if (kind === "field" && !options.field) throw new Error(`bosun.on.field: "${base}" needs a field: give { field: "spec.x" }`);
    if (kind === "timer" && !(options.interval && options.interval > 0)) throw new Error(`bosun.timer: "${base}" needs { interval: seconds }`);
    const id = kind === "field" ? `${base}/${options.field}` : base;
    const handler: Handler = {
      id, kind, fn, options,
      key: `${kind}:${id}:${this.handlers.length}`,
      resource: resource === undefined ? undefined : selector(resource),
      localChecks: localChecks(options),
    };
    this.handlers.push(handler);
    return fn;
  }

  /** The handler for a call: by its key when the controller sent one, else by its id among
   * the given kinds. */
  find(key: string, id: string, kinds: readonly Kind[]): Handler | undefined {
    if (key) {
      const byKey = this.handlers.find((h) => h.key === key);
      if (byKey) return byKey;
    }
    return this.handlers.find((h) => h.id === id && kinds.includes(h.kind));
  }

  /** For a sub-handler call: the top-level handler and the chain of sub-handler ids from it
   * down to the parent (`parentId` is the parent's full id; a top-level id may contain `/`). */
  route(key: string, parentId: string): [Handler, string[]] | undefined {
    const top = key ? this.handlers.find((h) => h.key === key) : undefined;
    const candidates = top ? [top] : [...this.handlers].sort((a, b) => b.id.length - a.id.length);
    for (const h of candidates) {
      if (parentId === h.id) return [h, []];
      if (parentId.startsWith(`${h.id}/`)) return [h, parentId.slice(h.id.length + 1).split("/")];
    }
    return undefined;
  }

  /** Declares the kinds `resource`'s handlers create as owned children (as controller-runtime's
   * `Owns()`): the controller needs nothing of it to run, but `bosun rbac` grants get, create
   * and patch on them. Resources are named as for handlers: `owns("kopfexamples", "v1/pods",
   * "deployments.apps")`. Several calls for one resource add up. */
  owns(resource: ResourceInput, ...kinds: ResourceInput[]): void {
    if (kinds.length === 0) throw new TypeError("bosun.owns(resource, kind, ...): name at least one owned kind");
    const target = ownedSelector(resource, "resource");
    const selectors = kinds.map((kind) => ownedSelector(kind, "owned kind"));
    let entry = this.owned.find((o) => sameSelector(o.resource, target));
    if (!entry) this.owned.push(entry = { resource: target, kinds: [] });
    for (const kind of selectors) {
      if (!entry.kinds.some((k) => sameSelector(k, kind))) entry.kinds.push(kind);
    }
  }

  /** The contract's `ResourceSettings` (Describe's `resources`): what each resource's handlers
   * own. */
  resourceSettings(): ResourceSettings[] {
    return this.owned.map((o) => ({ resource: { ...o.resource }, owns: o.kinds.map((k) => ({ ...k })) }));
  }

  /** Forgets every handler and owned kind (for tests). */
  clear(): void {
    this.handlers.length = 0;
    this.owned.length = 0;
  }
}

const REGISTRY_KEY = Symbol.for("bosun-operator.registry");

/** The registry `bosun.on.*` registers into, shared by every copy of the package. */
export function defaultRegistry(): Registry {
  return ((globalThis as any)[REGISTRY_KEY] ??= new Registry());
}

/** Turns a resource name into the contract's selector. */
export function selector(resource: ResourceInput): Selector {
  if (typeof resource === "string") return { group: "", version: "", name: resource };
  const name = resource.plural ?? resource.name ?? "";
  if (!name) throw new Error("a resource needs a plural or name");
  return { group: resource.group ?? "", version: resource.version ?? "", name };
}

/** A resource of `owns`, which must name one. */
function ownedSelector(resource: ResourceInput, what: string): Selector {
  if (typeof resource !== "string" && (typeof resource !== "object" || resource === null)) {
    throw new TypeError(`bosun.owns: the ${what} ${String(resource)} is not a name: give a resource as handlers take it, e.g. "v1/pods"`);
  }
  const s = selector(resource);
  if (!s.name.trim()) throw new TypeError(`bosun.owns: the ${what} is empty: give a resource as handlers take it, e.g. "v1/pods"`);
  return s;
}

function sameSelector(a: Selector, b: Selector): boolean {
  return a.group === b.group && a.version === b.version && a.name === b.name;
}

function isPredicate(value: unknown): value is (value: unknown, kwargs: any) => boolean {
  return typeof value === "function";
}

function localChecks(options: RegisterOptions): Handler["localChecks"] {
  const checks: Handler["localChecks"] = [];
  for (const section of ["labels", "annotations"] as const) {
    for (const [key, cond] of Object.entries(options[section] ?? {})) {
      if (isPredicate(cond)) checks.push([`${section}.${key}`, cond]);
    }
  }
  for (const name of ["value", "old", "new"] as const) {
    const cond = options[name];
    if (isPredicate(cond)) checks.push([name, cond]);
  }
  if (options.when) {
    const when = options.when;
    checks.push(["when", (_v, kwargs) => when(kwargs)]);
  }
  return checks;
}

/** A condition the controller checks; `undefined` for predicates (this server's own). */
export function valueFilter(cond: unknown): ValueFilter | undefined {
  if (isPredicate(cond) || cond === undefined) return undefined;
  if (cond === PRESENT) return { present: true };
  if (cond === ABSENT) return { absent: true };
  return { equals: Buffer.from(JSON.stringify(cond)) };
}

/** The contract's options of a handler (also of a sub-handler). */
export function optionsSpec(options: HandlerOptionsInput & { optional?: boolean; deleted?: boolean }): HandlerOptions {
  const spec: HandlerOptions = {
    errors: options.errors === "permanent" ? "ERRORS_MODE_PERMANENT" : options.errors === "ignored" ? "ERRORS_MODE_IGNORED" : "ERRORS_MODE_TEMPORARY",
    optional: !!options.optional,
    deleted: !!options.deleted,
  };
  if (options.retries !== undefined) spec.retries = options.retries;
  if (options.backoff !== undefined) spec.backoff_seconds = options.backoff;
  if (options.timeout !== undefined) spec.timeout_seconds = options.timeout;
  if (options.callTimeout !== undefined) spec.call_timeout_seconds = options.callTimeout;
  return spec;
}

/** The contract's HandlerSpec of one handler. */
export function handlerSpec(handler: Handler): HandlerSpec {
  const o = handler.options;
  const filters: Filters = { labels: {}, annotations: {}, has_when: handler.localChecks.length > 0 };
  for (const section of ["labels", "annotations"] as const) {
    for (const [key, cond] of Object.entries(o[section] ?? {})) {
      const filter = valueFilter(cond);
      if (filter) filters[section]![key] = filter;
    }
  }
  const spec: HandlerSpec = { id: handler.id, kind: KINDS[handler.kind], key: handler.key, filters };
  if (handler.resource) spec.resource = handler.resource;
  if (handler.kind === "field" || handler.kind === "update") spec.field = o.field ?? "";
  if (o.field && (handler.kind !== "field" || o.value !== undefined)) filters.field = o.field;
  for (const name of ["value", "old", "new"] as const) {
    const filter = valueFilter(o[name]);
    if (filter) filters[name] = filter;
  }
  spec.options = optionsSpec(o);
  if (handler.kind === "timer") {
    spec.timer = { interval_seconds: o.interval ?? 0, idle_seconds: o.idle ?? 0, initial_delay_seconds: o.initialDelay ?? 0, sharp: !!o.sharp };
  }
  if (handler.kind === "daemon") {
    spec.daemon = { initial_delay_seconds: o.initialDelay ?? 0, cancellation_timeout_seconds: o.cancellationTimeout ?? 0, backoff_seconds: o.backoff ?? 0 };
  }
  if (handler.kind === "validate" || handler.kind === "mutate") {
    spec.admission = { operations: o.operations ?? [], subresources: o.subresources ?? [], side_effects: !!o.sideEffects, fail_closed: !!o.failClosed };
  }
  return spec;
}
