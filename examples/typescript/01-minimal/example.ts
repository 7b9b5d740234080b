// Kopf's example 01: the minimal operator. Its result becomes the object's status.
import * as bosun from "bosun-operator";

bosun.on.create("kopfexamples", ({ spec }) => {
  console.log(`And here we are! Creating: ${JSON.stringify(spec)}`);
  return { message: "hello world" }; // will be the new status
}, { id: "create_fn" });
