/**
 * Bosun's TypeScript SDK: Kopf's API for handler servers of the bosun controller.
 *
 * ```ts
 * import * as bosun from "bosun-operator";
 * bosun.on.create("kopfexamples", async ({ spec, logger }) => {
 *   logger.info(`creating with ${spec.field}`);
 *   return { message: "hello world" };
 * }, { id: "create_fn" });
 * ```
 *
 * Every handler call is at-least-once: after a crash or restart the same attempt may be sent
 * again, so handlers must be idempotent. Serve the registered handlers with the CLI
 * (`bosun-node handlers.ts`) or `bosun.serve()`.
 */
export { on, timer, daemon, index, owns } from "./on";
export type { Fn, TimerOptions, DaemonOptions, AdmissionOptions } from "./on";
export { TemporaryError, PermanentError, AdmissionError } from "./errors";
export type { TemporaryErrorOptions, AdmissionErrorOptions } from "./errors";
export { event, info, warn, exception, own, adopt, subhandler } from "./context";
export type { Logger, EventFields, OwnOptions } from "./context";
export { PRESENT, ABSENT, Registry, defaultRegistry } from "./registry";
export type { RegisterOptions, HandlerOptionsInput, ResourceInput, ErrorsMode, Kind } from "./registry";
export type { Body, Memo, Resource, DiffItem, ObjectKwargs, ChangingKwargs, EventKwargs, DaemonKwargs, ActivityKwargs, AdmissionKwargs } from "./kwargs";
export type { Patch, MetaPatch, Json } from "./patch";
export { Index } from "./indices";
export { serve, listenAddress, LISTEN_ENV, DEFAULT_LISTEN } from "./serve";
export type { Running, ServeOptions } from "./serve";
export { Servicer } from "./servicer";
export { sleep } from "./sleep";
/** Testing helpers (also the subpath `bosun-operator/testing`): `testing.call`, `testing.Runner`… */
export * as testing from "./testing";
export type { OperatorSettings, StorageSettings, WebhookServerSettings } from "./settings";
