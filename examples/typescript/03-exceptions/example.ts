// Kopf's example 03: how errors end a handler — permanently, after retries, or unexpectedly.
import * as bosun from "bosun-operator";

class MyException extends Error {}

bosun.on.create("kopfexamples", () => {
  throw new bosun.PermanentError("Fail once and for all.");
}, { id: "instant_failure_with_only_a_message" });

bosun.on.create("kopfexamples", ({ retry }) => {
  if (retry < 3) { // 0, 1, 2, 3
    throw new bosun.TemporaryError("Expected recoverable error.", { delay: 1.0 });
  }
}, { id: "eventual_success_with_a_few_messages" });

bosun.on.create("kopfexamples", () => {
  throw new MyException("An error that is supposed to be recoverable.");
}, { id: "eventual_failure_with_tracebacks", retries: 3, backoff: 1.0 });

bosun.on.create("kopfexamples", () => {
  throw new MyException("An error that is supposed to be recoverable.");
}, { id: "instant_failure_with_traceback", errors: "permanent", backoff: 1.0 });
