/**
 * `bosun.v1.HandlerServer` for a registry: each call of the contract in, its answer out.
 * Whatever a handler does ends as an answer, never as a gRPC error: Kopf's errors map to
 * outcomes, anything else is an unexpected error with its stack; a request the server cannot
 * read is that call's unexpected error too. The only gRPC errors are NOT_FOUND for a handler
 * id this server does not have and UNAVAILABLE while its indices wait to be filled.
 */
import * as os from "node:os";
import { Collector, inCall, loggerFor, subhandler, type EventSpec, type SubhandlerDecl } from "./context";
import { brandOf, failureOf, type Failure } from "./errors";
import { Index } from "./indices";
import { dateOf, diffOf, objectParts, parseBody, parseJson, secondsOf, type Body, type Memo } from "./kwargs";
import { newPatch, prune } from "./patch";
import { newSettings, toContract } from "./settings";
import { handlerSpec, optionsSpec, type Handler, type Kind, type Registry } from "./registry";
import type { HandleRequest__Output as HandleRequest } from "./generated/bosun/v1/HandleRequest";
import type { HandleResponse } from "./generated/bosun/v1/HandleResponse";
import type { DescribeResponse } from "./generated/bosun/v1/DescribeResponse";
import type { ActivityRequest__Output as ActivityRequest } from "./generated/bosun/v1/ActivityRequest";
import type { ActivityResponse } from "./generated/bosun/v1/ActivityResponse";
import type { AdmitRequest__Output as AdmitRequest } from "./generated/bosun/v1/AdmitRequest";
import type { AdmitResponse } from "./generated/bosun/v1/AdmitResponse";
import type { DaemonRequest__Output as DaemonRequest } from "./generated/bosun/v1/DaemonRequest";
import type { DaemonMessage } from "./generated/bosun/v1/DaemonMessage";
import type { DaemonExit } from "./generated/bosun/v1/DaemonExit";
import type { StopDaemonRequest__Output as StopDaemonRequest } from "./generated/bosun/v1/StopDaemonRequest";
import type { Event } from "./generated/bosun/v1/Event";
import type { LogLine } from "./generated/bosun/v1/LogLine";

/** The controller asked for a handler this server does not have (gRPC NOT_FOUND). */
export class NoSuchHandler extends Error {}
/** The server cannot answer yet (gRPC UNAVAILABLE): the controller waits and asks again. */
export class Unavailable extends Error {}

const REASONS: Record<string, string> = {
  REASON_CREATE: "create", REASON_UPDATE: "update", REASON_DELETE: "delete", REASON_RESUME: "resume",
  REASON_EVENT: "event", REASON_TIMER: "timer", REASON_INDEX: "index",
};
/** The kinds a reason may call, for a controller that sends no `handler_key`. */
const KINDS_OF_REASON: Record<string, readonly Kind[]> = {
  REASON_CREATE: ["create", "field"], REASON_UPDATE: ["update", "field"], REASON_DELETE: ["delete", "resume"],
  REASON_RESUME: ["resume"], REASON_EVENT: ["event"], REASON_TIMER: ["timer"], REASON_INDEX: ["index"],
};
const RESOURCE_KINDS: readonly Kind[] = ["create", "update", "delete", "resume", "field", "event", "timer", "index"];

function jsonBytes(value: unknown, what: string): Buffer {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new Unusable(`the handler's ${what} is not JSON-serialisable: ${(e as Error).message}`);
  }
  return Buffer.from(text ?? "null");
}

/** A handler's return value or patch that cannot be sent. */
class Unusable extends Error {}

function eventMessage(e: EventSpec): Event {
  const event: Event = { type: e.type, reason: e.reason, message: e.message };
  if (e.regarding) event.regarding = e.regarding;
  return event;
}

function fill(collector: Collector, response: { logs?: LogLine[]; events?: Event[] }, withEvents: boolean): void {
  collector.sent = true;
  response.logs = collector.logs.map((l) => ({ level: l.level, message: l.message }));
  if (withEvents) response.events = collector.events.map(eventMessage);
}

function prefixOf(body: Body): string {
  const meta = body.metadata ?? {};
  return meta.namespace ? `[${meta.namespace}/${meta.name ?? ""}] ` : `[${meta.name ?? ""}] `;
}

/** Answers the contract's calls from a registry. */
export class Servicer {
  readonly serverName: string;
  private readonly memos = new Map<string, Memo>();
  private readonly daemons = new Map<string, AbortController>();
  readonly indices: Record<string, Index> = {};
  readonly operatorMemo: Memo = {};
  /** Whether a controller described this server: until then, a server with indices has
   * empty ones, so it answers other calls UNAVAILABLE. */
  private described = false;

  constructor(readonly registry: Registry, serverName = "") {
    this.serverName = serverName || `typescript:${process.pid}@${os.hostname()}`;
    for (const h of registry.handlers) if (h.kind === "index") this.indices[h.id] = new Index();
  }

  /** Describe: the registry. */
  describe(): DescribeResponse {
    this.described = true;
    return { handlers: this.registry.handlers.map(handlerSpec), server_name: this.serverName, resources: this.registry.resourceSettings(), finishes_parents: false };
  }

  private memo(uid: string | undefined): Memo {
    if (!uid) return { ...this.operatorMemo };
    let memo = this.memos.get(uid);
    if (memo === undefined) this.memos.set(uid, (memo = { ...this.operatorMemo }));
    return memo;
  }

  private objectKwargs(body: Body, collector: Collector, resource: any, traceparent?: string) {
    const parts = objectParts(body);
    return {
      ...parts,
      patch: newPatch(),
      logger: loggerFor(collector),
      memo: this.memo(parts.uid),
      resource: { group: "", version: "", plural: "", kind: "", namespaced: false, ...(resource ?? {}) },
      param: undefined as unknown,
      indices: this.indices,
      traceparent,
    };
  }

  /** Handle: one attempt of one handler or sub-handler. Throws NoSuchHandler/Unavailable. */
  async handle(request: HandleRequest, traceparent?: string): Promise<HandleResponse> {
    if (Object.keys(this.indices).length > 0 && !this.described && request.reason !== "REASON_INDEX") {
      throw new Unavailable("this handler server has just started and its indices are empty: it waits to be described");
    }
    let response: HandleResponse = {};
    let collector = new Collector();
    try {
      const body = parseBody(request.object);
      collector = new Collector(prefixOf(body));
      const reason = REASONS[request.reason] ?? "";
      const kwargs: Record<string, any> = {
        ...this.objectKwargs(body, collector, request.resource, traceparent),
        reason, cause: reason, retry: request.retry ?? 0,
        old: parseJson(request.old, "the old value", null), new: parseJson(request.new, "the new value", null),
        diff: diffOf(request.diff ?? []), started: dateOf(request.started), runtime: secondsOf(request.runtime),
        param: parseJson(request.param, "a parameter", undefined), subhandler,
      };
      if (request.reason === "REASON_EVENT") {
        kwargs.type = request.event_type || undefined;
        kwargs.event = { type: request.event_type || undefined, object: body };
      }
      response = await this.run(request, kwargs, body, collector);
    } catch (e) {
      if (e instanceof NoSuchHandler || e instanceof Unavailable) throw e;
      const message = e instanceof Unusable ? e.message : `the handler server could not run "${request.handler_id}": ${failureOf(e).message}`;
      response = { outcome: "OUTCOME_UNEXPECTED_ERROR", message };
    }
    fill(collector, response, true);
    return response;
  }

  private async run(request: HandleRequest, kwargs: Record<string, any>, body: Body, collector: Collector): Promise<HandleResponse> {
    let top: Handler | undefined;
    let chain: string[] = [];
    if (request.parent_id) {
      const routed = this.registry.route(request.handler_key, request.parent_id);
      if (!routed) throw new Error(`no handler "${request.parent_id}" for the sub-handler "${request.handler_id}"`);
      [top, chain] = routed;
      chain = [...chain, request.subhandler_id];
    } else {
      top = this.registry.find(request.handler_key, request.handler_id, KINDS_OF_REASON[request.reason] ?? RESOURCE_KINDS);
      if (!top) {
        const known = this.registry.handlers.map((h) => h.id).join(", ");
        throw new NoSuchHandler(`handler server ${JSON.stringify(this.serverName)} has no handler ${JSON.stringify(request.handler_id)}; it has: ${known}`);
      }
    }
    if (chain.length === 0) {
      if (top.options.param !== undefined) kwargs.param = top.options.param;
      if (top.kind === "index") return this.index(top, request, kwargs, body, collector);
      const skipped = checkLocal(top, kwargs, body);
      if (skipped) return { outcome: "OUTCOME_SKIPPED", message: skipped };
    }
    let fn = top.fn;
    for (const [depth, childId] of chain.entries()) {
      const declared = await rebuild(fn, kwargs, body);
      const decl = declared.get(childId);
      if (!decl) {
        const parent = [top.id, ...chain.slice(0, depth)].join("/");
        return { outcome: "OUTCOME_PERMANENT_ERROR", message: `the handler "${parent}" no longer declares the sub-handler "${childId}" (it declares: ${[...declared.keys()].join(", ") || "none"})` };
      }
      fn = decl.fn;
      if (decl.param !== undefined) kwargs.param = decl.param;
    }
    let result: unknown;
    try {
      result = await inCall({ collector, body }, () => fn(kwargs));
    } catch (e) {
      const response: HandleResponse = { ...failureOf(e) };
      setPatch(response, kwargs.patch);
      return response;
    }
    const response: HandleResponse = { outcome: "OUTCOME_SUCCESS" };
    if (result !== undefined && result !== null) response.result = jsonBytes(result, "return value");
    setPatch(response, kwargs.patch);
    response.subhandlers = [...collector.subhandlers.values()].map((d) => {
      const sub: { id: string; options: any; param?: Buffer } = { id: d.id, options: optionsSpec(d.options) };
      if (d.param !== undefined) sub.param = jsonBytes(d.param, "sub-handler parameter");
      return sub;
    });
    response.owned = collector.owned.map((o) => ({ object: jsonBytes(o.object, "owned object"), apply: o.apply, copy_labels: o.copyLabels }));
    return response;
  }

  private async index(handler: Handler, request: HandleRequest, kwargs: Record<string, any>, body: Body, collector: Collector): Promise<HandleResponse> {
    const index = this.indices[handler.id];
    const meta = body.metadata ?? {};
    const key = `${meta.namespace ?? ""}/${meta.name ?? ""}`;
    if (request.event_type === "DELETED") {
      index.forget(key);
      return { outcome: "OUTCOME_SUCCESS" };
    }
    const skipped = checkLocal(handler, kwargs, body);
    if (skipped) {
      index.forget(key);
      return { outcome: "OUTCOME_SKIPPED", message: skipped };
    }
    try {
      index.replace(key, await inCall({ collector, body }, () => handler.fn(kwargs)));
      return { outcome: "OUTCOME_SUCCESS" };
    } catch (e) {
      return { ...failureOf(e) };
    }
  }

  /** Daemon: runs the daemon, sending its log lines and events as they come and its exit
   * last; `send` writes one stream message. Resolves when the exit was sent. */
  async daemon(request: DaemonRequest, send: (message: DaemonMessage) => void, cancelled: AbortSignal): Promise<void> {
    const exit = (e: DaemonExit) => send({ exit: e });
    const handler = this.registry.find(request.handler_key, request.handler_id, ["daemon"]);
    if (!handler) return exit({ outcome: "OUTCOME_PERMANENT_ERROR", message: `this handler server has no daemon "${request.handler_id}"` });
    let body: Body;
    try {
      body = parseBody(request.object);
    } catch (e) {
      return exit({ outcome: "OUTCOME_UNEXPECTED_ERROR", message: (e as Error).message });
    }
    const collector = new Collector(prefixOf(body), (what, item) => {
      if (what === "log") send({ log: { level: item.level, message: item.message } });
      else send({ event: eventMessage(item) });
    });
    const stop = new AbortController();
    const kwargs: Record<string, any> = {
      ...this.objectKwargs(body, collector, request.resource),
      retry: request.retry ?? 0, stopped: stop.signal, started: new Date(), param: handler.options.param, reason: "daemon",
    };
    const skipped = checkLocal(handler, kwargs, body);
    if (skipped) return exit({ outcome: "OUTCOME_SKIPPED", message: skipped });
    const running = `${handler.key}\u0000${kwargs.uid ?? ""}`;
    const onCancel = () => stop.abort();
    cancelled.addEventListener("abort", onCancel);
    this.daemons.set(running, stop);
    let result: DaemonExit = { outcome: "OUTCOME_SUCCESS" };
    try {
      await inCall({ collector, body }, () => handler.fn(kwargs));
    } catch (e) {
      result = { ...failureOf(e) };
    } finally {
      cancelled.removeEventListener("abort", onCancel);
      if (this.daemons.get(running) === stop) this.daemons.delete(running);
    }
    const patch = prune(kwargs.patch);
    if (patch) send({ merge_patch: Buffer.from(JSON.stringify(patch)) });
    exit({ ...result, stopped: stop.signal.aborted });
  }

  /** StopDaemon: aborts the daemon's `stopped` signal; whether it was running. */
  stopDaemon(request: StopDaemonRequest): { stopping: boolean } {
    const handler = this.registry.find(request.handler_key, request.handler_id, ["daemon"]);
    const stop = handler && this.daemons.get(`${handler.key}\u0000${request.uid}`);
    if (!stop) return { stopping: false };
    stop.abort();
    return { stopping: true };
  }

  /** Stops every running daemon (the server is shutting down). */
  stopAllDaemons(): void {
    for (const stop of this.daemons.values()) stop.abort();
  }

  /** Activity: one startup, cleanup or probe handler. */
  async activity(request: ActivityRequest): Promise<ActivityResponse> {
    const handler = this.registry.find(request.handler_key, request.handler_id, ["startup", "cleanup", "probe"]);
    if (!handler) return { outcome: "OUTCOME_PERMANENT_ERROR", message: `this handler server has no activity "${request.handler_id}"` };
    const collector = new Collector();
    const kwargs = {
      logger: loggerFor(collector), retry: request.retry ?? 0, memo: this.operatorMemo, param: handler.options.param,
      activity: handler.kind, indices: this.indices, settings: newSettings(),
    };
    let response: ActivityResponse;
    try {
      const result = await inCall({ collector, body: {} }, () => handler.fn(kwargs));
      response = { outcome: "OUTCOME_SUCCESS" };
      if (result !== undefined && result !== null) response.result = jsonBytes(result, "return value");
      const settings = handler.kind === "startup" ? toContract(kwargs.settings) : undefined;
      if (settings) response.settings = settings;
    } catch (e) {
      response = { ...(e instanceof Unusable ? { outcome: "OUTCOME_UNEXPECTED_ERROR", message: e.message } : failureOf(e)) } as Failure;
    }
    fill(collector, response, false);
    return response;
  }

  /** Admit: one admission review; a denial is an answer, never an error. */
  async admit(request: AdmitRequest): Promise<AdmitResponse> {
    const handler = this.registry.find(request.handler_key, request.handler_id, ["validate", "mutate"]);
    if (!handler) return { allowed: false, code: 500, message: `this handler server has no admission handler "${request.handler_id}"` };
    const warnings: string[] = [];
    try {
      const review = parseJson(request.request, "an admission request", {}) ?? {};
      const body: Body = review.object ?? review.oldObject ?? {};
      const collector = new Collector(prefixOf(body));
      const kwargs: Record<string, any> = {
        ...this.objectKwargs(body, collector, undefined),
        warnings, old: review.oldObject ?? undefined, new: review.object ?? undefined, operation: review.operation,
        dryrun: !!review.dryRun, userinfo: review.userInfo ?? {}, headers: { ...(request.headers ?? {}) },
        subresource: review.subResource || undefined, sslpeer: {}, reason: "admission", param: handler.options.param,
      };
      if (review.uid) kwargs.uid = review.uid;
      const resource = review.resource ?? {};
      kwargs.resource = { group: resource.group ?? "", version: resource.version ?? "", plural: resource.resource ?? "", kind: review.kind?.kind ?? "", namespaced: !!review.namespace };
      const response: AdmitResponse = { allowed: true };
      if (!checkLocal(handler, kwargs, body)) {
        await inCall({ collector, body }, () => handler.fn(kwargs));
        const patch = prune(kwargs.patch);
        if (patch && handler.kind === "mutate") response.merge_patch = Buffer.from(JSON.stringify(patch));
      }
      response.warnings = warnings.map(String);
      return response;
    } catch (e) {
      const admission = brandOf(e) === "admission";
      const message = e instanceof Error ? e.message || e.name : String(e);
      return { allowed: false, message, code: admission ? ((e as any).code ?? 500) : 500, warnings: warnings.map(String) };
    }
  }
}

/** Evaluates the filters only this server can (predicates); a reason to skip, or undefined. */
export function checkLocal(handler: Handler, kwargs: Record<string, any>, body: Body): string | undefined {
  for (const [name, check] of handler.localChecks) {
    let value: unknown;
    if (name.startsWith("labels.") || name.startsWith("annotations.")) {
      const [section, key] = [name.slice(0, name.indexOf(".")), name.slice(name.indexOf(".") + 1)];
      value = (kwargs[section] ?? {})[key];
    } else if (name === "value") {
      value = valueAt(body, handler.options.field ?? "");
    } else {
      value = kwargs[name];
    }
    if (!check(value, kwargs)) return `the ${name} filter does not hold`;
  }
  return undefined;
}

/** The value at a dotted path of an object, undefined when absent. */
export function valueAt(body: unknown, path: string): unknown {
  let value: any = body;
  for (const key of path.split(".").filter(Boolean)) {
    if (typeof value !== "object" || value === null) return undefined;
    value = value[key];
  }
  return value;
}

function setPatch(response: HandleResponse, patch: unknown): void {
  const pruned = prune(patch);
  if (pruned) response.merge_patch = jsonBytes(pruned, "patch");
}

/** Runs a parent again with a throwaway answer to get its sub-handlers' code. */
async function rebuild(fn: Handler["fn"], kwargs: Record<string, any>, body: Body): Promise<Map<string, SubhandlerDecl>> {
  const scratch = new Collector("", () => {});
  const copy = { ...kwargs, patch: newPatch(), logger: loggerFor(scratch) };
  try {
    await inCall({ collector: scratch, body }, () => fn(copy));
  } catch {
    // Its outcome does not matter here: only what it declared.
  }
  return scratch.subhandlers;
}
