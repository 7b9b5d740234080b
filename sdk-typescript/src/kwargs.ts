/**
 * Kopf's kwargs, as one typed argument object per handler kind, and how they are built from a
 * request (pure: the body and the request's fields in, the object out).
 */
import type { Logger } from "./context";
import type { Patch } from "./patch";
import type { Index } from "./indices";

/** A Kubernetes object as JSON. */
export type Body = Record<string, any>;

/** Memory kept per object between its calls (Kopf's `memo`), within this server's life. */
export type Memo = Record<string, any>;

/** The resource of the handled object, as the controller resolved it. */
export interface Resource {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

/** One change between the old and the new essence. */
export interface DiffItem {
  op: "add" | "change" | "remove";
  path: string[];
  old: unknown;
  new: unknown;
}

/** What every object handler gets. */
export interface ObjectKwargs {
  /** The whole object. */
  body: Body;
  spec: Record<string, any>;
  status: Record<string, any>;
  metadata: Record<string, any>;
  /** The same as `metadata`. */
  meta: Record<string, any>;
  name: string;
  namespace: string | undefined;
  uid: string | undefined;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** A merge patch of the object, applied after the call. */
  patch: Patch;
  logger: Logger;
  memo: Memo;
  resource: Resource;
  /** The handler's (or sub-handler's) parameter. */
  param: any;
  /** The indices of this server's index handlers, by id. */
  indices: Record<string, Index>;
  /** The W3C traceparent of the controller's call, when it sent one. */
  traceparent: string | undefined;
}

/** What create/update/delete/resume/field/timer handlers get. */
export interface ChangingKwargs extends ObjectKwargs {
  /** Why the handler runs: create, update, delete, resume, timer… */
  reason: string;
  /** Failed attempts before this one. */
  retry: number;
  /** When the first attempt started. */
  started: Date | undefined;
  /** Seconds since `started`. */
  runtime: number;
  diff: DiffItem[];
  /** The old essence (for field handlers: the old value of the field). */
  old: any;
  /** The new essence (for field handlers: the new value of the field). */
  new: any;
  /** Declares a sub-handler (same as `bosun.subhandler`). */
  subhandler: typeof import("./context").subhandler;
}

/** What event handlers get. */
export interface EventKwargs extends ChangingKwargs {
  /** The watch event type (ADDED, MODIFIED, DELETED), undefined for the initial listing. */
  type: string | undefined;
  event: { type: string | undefined; object: Body };
}

/** What daemons get. */
export interface DaemonKwargs extends ObjectKwargs {
  /** Restarts after temporary errors so far. */
  retry: number;
  /** Aborted when the daemon must stop (the object is deleted, the controller stops…). */
  stopped: AbortSignal;
  started: Date;
}

/** What startup, cleanup and probe handlers get. */
export interface ActivityKwargs {
  logger: Logger;
  retry: number;
  /** The operator's memo. */
  memo: Memo;
  param: any;
  activity: "startup" | "cleanup" | "probe";
  indices: Record<string, Index>;
  /** Startup handlers: operator settings to change (sent to the controller on success). */
  settings: import("./settings").OperatorSettings;
}

/** What validating and mutating admission handlers get. */
export interface AdmissionKwargs extends ObjectKwargs {
  /** Warnings to show the client: push strings. */
  warnings: string[];
  old: Body | undefined;
  new: Body | undefined;
  operation: string | undefined;
  dryrun: boolean;
  userinfo: Record<string, any>;
  headers: Record<string, string>;
  subresource: string | undefined;
  sslpeer: Record<string, any>;
}

/** The object's own kwargs: its parts, with empty defaults. */
export function objectParts(body: Body): Pick<ObjectKwargs, "body" | "spec" | "status" | "metadata" | "meta" | "name" | "namespace" | "uid" | "labels" | "annotations"> {
  const asObject = (v: unknown) => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, any>) : {});
  const metadata = asObject(body.metadata);
  return {
    body,
    spec: asObject(body.spec),
    status: asObject(body.status),
    metadata,
    meta: metadata,
    name: typeof metadata.name === "string" ? metadata.name : "",
    namespace: typeof metadata.namespace === "string" ? metadata.namespace : undefined,
    uid: typeof metadata.uid === "string" ? metadata.uid : undefined,
    labels: asObject(metadata.labels),
    annotations: asObject(metadata.annotations),
  };
}

/** JSON bytes from the controller: `fallback` when empty; an Error naming `what` when not JSON. */
export function parseJson(data: Uint8Array | undefined, what: string, fallback: unknown = undefined): any {
  if (!data || data.length === 0) return fallback;
  try {
    return JSON.parse(Buffer.from(data).toString("utf8"));
  } catch (e) {
    throw new Error(`the controller sent ${what} that is not JSON: ${(e as Error).message}`);
  }
}

/** The request's object: a JSON object, or an Error. */
export function parseBody(data: Uint8Array | undefined): Body {
  const body = parseJson(data, "an object", {});
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new Error("the controller sent an object that is not a JSON object");
  }
  return body;
}

const DIFF_OPS: Record<string, DiffItem["op"]> = { OPERATION_ADD: "add", OPERATION_CHANGE: "change", OPERATION_REMOVE: "remove" };

/** The request's diff, Kopf's way. */
export function diffOf(items: { operation: string; path: string[]; old: Uint8Array; new: Uint8Array }[]): DiffItem[] {
  return items.map((item) => ({
    op: DIFF_OPS[item.operation] ?? "change",
    path: [...item.path],
    old: parseJson(item.old, "a diff's old value", undefined),
    new: parseJson(item.new, "a diff's new value", undefined),
  }));
}

/** A protobuf Timestamp as a Date. */
export function dateOf(ts: { seconds: number | string; nanos: number } | null | undefined): Date | undefined {
  if (!ts) return undefined;
  return new Date(Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6));
}

/** A protobuf Duration in seconds. */
export function secondsOf(d: { seconds: number | string; nanos: number } | null | undefined): number {
  return d ? Number(d.seconds) + (d.nanos ?? 0) / 1e9 : 0;
}
