// bosun-operator/testing as a user's test uses it, from the package installed here (npm run
// install-sdk): example 01 in-process with testing.call, then under the real `bosun dev` with
// testing.Runner. Without the package or the bosun binary, a test fails under CI=true and is
// skipped elsewhere, saying why.
import test from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { EXAMPLES, OBJECT, ROOT } from "./bosun-dev.mjs";

const PACKAGE = path.join(EXAMPLES, "node_modules", "bosun-operator", "package.json");

/** The installed package's testing helpers, or undefined when the test is skipped. */
async function installed(t) {
  if (fs.existsSync(PACKAGE)) return (await import("bosun-operator/testing"));
  const what = `the SDK installed from its tarball (${PACKAGE}: cd examples/typescript && npm run install-sdk)`;
  const ci = process.env.CI;
  if (ci && !["0", "false"].includes(ci)) throw new Error(`needs ${what}, which is missing; under CI (CI=${ci}) that fails the test`);
  process.stderr.write(`SKIPPED ${t.name}: ${what} is missing (under CI=true this fails)\n`);
  t.skip(`${what} is missing`);
  return undefined;
}

test("01-minimal in-process: testing.call gives the result that becomes the status", async (t) => {
  const testing = await installed(t);
  if (!testing) return;
  const bosun = await import("bosun-operator");
  const { tsImport } = await import("tsx/esm/api");
  await tsImport(path.join(EXAMPLES, "01-minimal", "example.ts"), import.meta.url);
  const got = await testing.call("create_fn", { body: { metadata: { name: "kopf-example-1", namespace: "default" }, spec: { field: "value" } } });
  assert.equal(got.outcome, "success");
  assert.deepEqual(got.result, { message: "hello world" });
  assert.equal(bosun.testing.call, testing.call, "also `testing` of the package");
});

test("01-minimal under bosun dev: testing.Runner waits for the handler's success", async (t) => {
  const testing = await installed(t);
  if (!testing || !testing.requireBosun(t, { cwd: ROOT })) return;
  const runner = new testing.Runner([
    "dev", "--apply", path.join(ROOT, "examples", "crd.yaml"), "--apply", path.join(ROOT, "examples", "obj.yaml"),
    path.join(EXAMPLES, "01-minimal", "example.ts"),
  ], { cwd: ROOT });
  t.after(() => runner.stop());
  await runner.start();
  await runner.waitFor(`${OBJECT} Handler 'create_fn' succeeded.`, { timeoutMs: 60_000 });
  await runner.waitFor(`${OBJECT} Creation is processed: 1 succeeded; 0 failed.`, { timeoutMs: 60_000 });
  assert.equal(runner.count('And here we are! Creating: {"duration":"1m","field":"value"'), 1);
  assert.ok(runner.kubeconfig, "the dev cluster's kubeconfig is printed");
  const exit = await runner.stop();
  t.diagnostic(`bosun exited with ${JSON.stringify(exit)}`);
  assert.equal(runner.exitCode, 0, runner.output);
});
