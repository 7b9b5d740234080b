/**
 * `bosun-operator/testing` (also `testing` of the package): Bosun's testing helpers, as the
 * Python SDK's `bosun.testing` and the Go SDK's `bosuntest`.
 *
 * - In-process calls, no controller: `call` (resource handlers and sub-handlers; activities
 *   too), `activity`, `admit`, `daemon`, and `Harness` to keep memos, indices and daemons
 *   between calls. They go through the gRPC server's own code, so kwargs, errors and patches
 *   are what the controller gets.
 * - `Runner`: the real `bosun` (`dev` on an embedded cluster, or `run`) in the background of
 *   a test, with its output; `requireBosun(t)` skips (or under CI fails) a test without it.
 */
export { Harness, call, activity, admit } from "./harness";
export type { CallInput, CallOptions, CallReason, CallResult, HandlerRef, LogRecord, Outcome, Verdict } from "./harness";
export { DaemonRun, daemon } from "./daemon";
export type { DaemonExit, DaemonInput } from "./daemon";
export { Runner, BosunNotFound, bosunBinary, requireBosun } from "./runner";
export type { Exit, RunnerOptions } from "./runner";
