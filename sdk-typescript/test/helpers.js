// Shared by the unit tests: the built package (npm test builds it first).
const bosun = require("../dist/index.js");

/** A JSON object as the bytes the controller sends. */
function bytes(value) {
  return Buffer.from(JSON.stringify(value));
}

/** Bytes from the server as JSON (undefined when empty). */
function json(data) {
  return data && data.length ? JSON.parse(Buffer.from(data).toString("utf8")) : undefined;
}

/** A KopfExample body. */
function kex(spec = { field: "value" }, extra = {}) {
  return {
    apiVersion: "kopf.dev/v1", kind: "KopfExample",
    metadata: { name: "obj", namespace: "default", uid: "uid-1", labels: { app: "x" }, ...(extra.metadata ?? {}) },
    spec, ...(extra.status ? { status: extra.status } : {}),
  };
}

/** A HandleRequest as grpc-js hands it to the server (with the loader's defaults). */
function handleRequest(fields) {
  return {
    handler_id: "", reason: "REASON_CREATE", resource: null, object: Buffer.alloc(0), old: Buffer.alloc(0), new: Buffer.alloc(0),
    diff: [], retry: 0, started: null, runtime: null, param: Buffer.alloc(0), memo: Buffer.alloc(0), event_type: "",
    parent_id: "", subhandler_id: "", handler_key: "", finished_subhandlers: [], ...fields,
  };
}

module.exports = { bosun, bytes, json, kex, handleRequest };
