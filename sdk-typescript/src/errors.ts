/**
 * Kopf's errors and what a thrown value means as an outcome. Errors are recognised by a
 * brand (a global symbol), not by `instanceof`, so that a handler file importing another copy
 * of the package (an installed tarball beside the CLI's own) still raises the right outcome.
 */
import type { Outcome } from "./generated/bosun/v1/Outcome";

const BRAND = Symbol.for("bosun-operator.error");

type Brand = "temporary" | "permanent" | "admission";

/** Options of a temporary error. */
export interface TemporaryErrorOptions {
  /** Seconds before the next attempt; unset: the handler's backoff. */
  delay?: number;
}

/** Retry the handler after `delay` seconds (Kopf's `TemporaryError`). */
export class TemporaryError extends Error {
  /** Seconds before the next attempt, or undefined for the handler's backoff. */
  readonly delay: number | undefined;
  /** The brand that identifies this error across copies of the package. */
  readonly [BRAND]: Brand = "temporary";

  constructor(message = "", options: TemporaryErrorOptions = {}) {
    super(message);
    this.name = "TemporaryError";
    this.delay = options.delay;
  }
}

/** Fail the handler for good: it is not retried for this cause (Kopf's `PermanentError`). */
export class PermanentError extends Error {
  /** The brand that identifies this error across copies of the package. */
  readonly [BRAND]: Brand = "permanent";

  constructor(message = "") {
    super(message);
    this.name = "PermanentError";
  }
}

/** Options of an admission error. */
export interface AdmissionErrorOptions {
  /** The HTTP code of the denial; unset means 500. */
  code?: number;
}

/** Deny an admission request with this message (Kopf's `AdmissionError`). */
export class AdmissionError extends PermanentError {
  /** The HTTP code of the denial. */
  readonly code: number | undefined;
  /** The brand that identifies this error across copies of the package. */
  readonly [BRAND]: Brand = "admission";

  constructor(message = "", options: AdmissionErrorOptions = {}) {
    super(message);
    this.name = "AdmissionError";
    this.code = options.code;
  }
}

/** How an attempt failed, as the contract's outcome fields. */
export interface Failure {
  outcome: Outcome;
  message: string;
  delay_seconds?: number;
}

/** Which of Kopf's errors `error` is, if any. */
export function brandOf(error: unknown): Brand | undefined {
  if (typeof error === "object" && error !== null && BRAND in error) {
    return (error as { [BRAND]: Brand })[BRAND];
  }
  return undefined;
}

/** What a thrown value means: Kopf's errors by kind, anything else an unexpected error
 * with its stack (which starts with its message) as the message. */
export function failureOf(error: unknown): Failure {
  const brand = brandOf(error);
  const message = error instanceof Error ? error.message : String(error);
  if (brand === "temporary") {
    const delay = (error as TemporaryError).delay;
    const failure: Failure = { outcome: "OUTCOME_TEMPORARY_ERROR", message };
    if (typeof delay === "number" && Number.isFinite(delay)) failure.delay_seconds = delay;
    return failure;
  }
  if (brand === "permanent" || brand === "admission") {
    return { outcome: "OUTCOME_PERMANENT_ERROR", message };
  }
  const detail = error instanceof Error && error.stack ? error.stack : describe(error);
  return { outcome: "OUTCOME_UNEXPECTED_ERROR", message: detail };
}

function describe(value: unknown): string {
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    return `a non-Error was thrown: ${typeof value === "string" ? value : JSON.stringify(value)}`;
  } catch {
    return `a non-Error was thrown: ${String(value)}`;
  }
}
