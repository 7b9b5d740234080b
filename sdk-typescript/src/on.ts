/**
 * Kopf's registration API, `bosun.on.create("kopfexamples", fn, { id })` and its kin: each
 * registers `fn` into the default registry and returns it. The handler gets Kopf's kwargs as
 * one typed object; what it returns is its result (stored at `status.<id>`).
 */
import { defaultRegistry, type Kind, type RegisterOptions, type ResourceInput } from "./registry";
import type { ActivityKwargs, AdmissionKwargs, ChangingKwargs, DaemonKwargs, EventKwargs, ObjectKwargs } from "./kwargs";

/** A handler's function: sync or async. */
export type Fn<K> = (kwargs: K) => unknown;

type ChangeOptions = Omit<RegisterOptions, "interval" | "idle" | "sharp" | "initialDelay" | "cancellationTimeout" | "operations" | "subresources" | "sideEffects" | "failClosed">;

function resourceHandler<K>(kind: Kind) {
  return <F extends Fn<K>>(resource: ResourceInput, fn: F, options: ChangeOptions = {}): F =>
    defaultRegistry().register(kind, resource, fn, options);
}

function activity(kind: Kind) {
  return <F extends Fn<ActivityKwargs>>(fn: F, options: { id?: string; param?: unknown; retries?: number; backoff?: number; timeout?: number; errors?: RegisterOptions["errors"] } = {}): F =>
    defaultRegistry().register(kind, undefined, fn, options);
}

/** Timer options: `interval` (seconds) is required. */
export type TimerOptions = ChangeOptions & { interval: number; idle?: number; initialDelay?: number; sharp?: boolean };
/** Daemon options. */
export type DaemonOptions = ChangeOptions & { initialDelay?: number; cancellationTimeout?: number };
/** Admission options. */
export type AdmissionOptions = ChangeOptions & { operations?: string[]; subresources?: string[]; sideEffects?: boolean; failClosed?: boolean };

/** Calls `fn` periodically per object while it exists and matches (Kopf's `kopf.timer`). */
export function timer<F extends Fn<ChangingKwargs>>(resource: ResourceInput, fn: F, options: TimerOptions): F {
  return defaultRegistry().register("timer", resource, fn, options);
}

/** Runs `fn` for as long as each object exists and matches (Kopf's `kopf.daemon`); it must
 * return once `stopped` is aborted. */
export function daemon<F extends Fn<DaemonKwargs>>(resource: ResourceInput, fn: F, options: DaemonOptions = {}): F {
  return defaultRegistry().register("daemon", resource, fn, options);
}

/** Keeps what `fn` returns for each object in an in-memory index (Kopf's `kopf.index`),
 * given to every handler as `indices[id]`. */
export function index<F extends Fn<ObjectKwargs>>(resource: ResourceInput, fn: F, options: ChangeOptions = {}): F {
  return defaultRegistry().register("index", resource, fn, options);
}

/** Declares the kinds `resource`'s handlers create as owned children (as controller-runtime's
 * `Owns()`): the controller needs nothing of it to run, but `bosun rbac` grants get, create and
 * patch on them. Resources are named as for handlers: `bosun.owns("kopfexamples", "v1/pods",
 * "deployments.apps")`; several calls for one resource add up. Throws a `TypeError` without
 * kinds. Into the default registry; `registry.owns(...)` for another. */
export function owns(resource: ResourceInput, ...kinds: ResourceInput[]): void {
  defaultRegistry().owns(resource, ...kinds);
}

/** Kopf's `kopf.on`. */
export const on = {
  /** When an object is first seen without a stored diffbase. */
  create: resourceHandler<ChangingKwargs>("create"),
  /** When the essence of an object changed since it was last handled. */
  update: resourceHandler<ChangingKwargs>("update"),
  /** When an object is being deleted (a finalizer holds it unless `optional`). */
  delete: resourceHandler<ChangingKwargs>("delete"),
  /** For existing objects when the controller starts. */
  resume: resourceHandler<ChangingKwargs>("resume"),
  /** When the value at `options.field` changed; the id becomes `<id>/<field>`. */
  field: <F extends Fn<ChangingKwargs>>(resource: ResourceInput, fn: F, options: ChangeOptions & { field: string }): F =>
    defaultRegistry().register("field", resource, fn, options),
  /** For every raw watch event; failures are logged and ignored. */
  event: resourceHandler<EventKwargs>("event"),
  /** Once at the controller's start; all must succeed before it watches. */
  startup: activity("startup"),
  /** Once at the controller's exit. */
  cleanup: activity("cleanup"),
  /** On each liveness probe; the result is shown under the handler's id. */
  probe: activity("probe"),
  /** Reviews admission requests: throw `AdmissionError` to deny. */
  validate: <F extends Fn<AdmissionKwargs>>(resource: ResourceInput, fn: F, options: AdmissionOptions = {}): F =>
    defaultRegistry().register("validate", resource, fn, options),
  /** Reviews admission requests and may change the object through `patch`. */
  mutate: <F extends Fn<AdmissionKwargs>>(resource: ResourceInput, fn: F, options: AdmissionOptions = {}): F =>
    defaultRegistry().register("mutate", resource, fn, options),
  timer,
  daemon,
  index,
};
