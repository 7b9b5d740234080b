// Runs one TypeScript example under `bosun dev example.ts` (the real controller, the embedded dev cluster,
// the SDK's server from the npm pack tarball installed here) and waits on its output with
// deadlines. Needs the bosun binary (BOSUN_BINARY, else target/debug/bosun, built by
// `cargo build -p bosun-controller --bin bosun`) and `npm install --no-save ./bosun-operator-*.tgz`
// here: missing, a test fails under CI=true and is skipped elsewhere, saying why.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const EXAMPLES = path.resolve(HERE, "..");
export const ROOT = path.resolve(EXAMPLES, "..", "..");
export const OBJECT = "[default/kopf-example-1]";
export const DEADLINE_MS = 60_000;

const CLI = path.join(EXAMPLES, "node_modules", "bosun-operator", "dist", "cli.js");

function bosunBinary() {
  return process.env.BOSUN_BINARY || path.join(ROOT, "target", "debug", "bosun");
}

/** Whether the tools are there; when not: throws under CI, else skips `t` with the reason. */
export function requireTools(t) {
  const missing = [];
  if (!fs.existsSync(bosunBinary())) missing.push(`the bosun binary ${bosunBinary()} (set BOSUN_BINARY, or cargo build -p bosun-controller --bin bosun)`);
  if (!fs.existsSync(CLI)) missing.push(`the SDK installed from its tarball (${CLI}: see examples/typescript/README.md)`);
  if (missing.length === 0) return true;
  const ci = process.env.CI;
  const what = missing.join("; ");
  if (ci && !["", "0", "false"].includes(ci)) throw new Error(`needs ${what}, which is missing; under CI (CI=${ci}) that fails the test`);
  process.stderr.write(`SKIPPED ${t.name}: ${what} is missing (under CI=true this fails)\n`);
  t.skip(`${what} is missing`);
  return false;
}

/** `bosun dev` running one example, with its output. */
export class Dev {
  constructor(example, { applyObject = true } = {}) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), "bosun-ts-example-"));
    const args = ["dev", "--dir", this.dir, "--apply", path.join(ROOT, "examples", "crd.yaml")];
    if (applyObject) args.push("--apply", path.join(ROOT, "examples", "obj.yaml"));
    // The file alone, as users run it: bosun starts the SDK's CLI from the node_modules next to it.
    args.push("--node", process.execPath, path.join(EXAMPLES, example, "example.ts"));
    this.output = "";
    this.waiters = new Set();
    this.process = spawn(bosunBinary(), args, { cwd: ROOT, env: { ...process.env, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] });
    this.exited = new Promise((resolve) => this.process.on("exit", (code, signal) => resolve({ code, signal })));
    this.exited.then(() => this.notify());
    for (const stream of [this.process.stdout, this.process.stderr]) {
      stream.setEncoding("utf8");
      stream.on("data", (chunk) => {
        this.output += chunk;
        this.notify();
      });
    }
  }

  notify() {
    for (const waiter of this.waiters) waiter();
  }

  /** How often `text` occurs in the output so far. */
  count(text) {
    return this.output.split(text).length - 1;
  }

  /** Waits until `text` occurs `count` times in the output; fails with the output when it
   * does not within the deadline, or when bosun exited first. */
  waitFor(text, { count = 1, deadlineMs = DEADLINE_MS } = {}) {
    return new Promise((resolve, reject) => {
      let exited = false;
      this.exited.then(() => (exited = true));
      const check = () => {
        if (this.count(text) >= count) return done(resolve);
        if (exited || this.process.exitCode !== null) return done(() => reject(new Error(`bosun exited before printing ${JSON.stringify(text)}:\n${this.output}`)));
      };
      const timer = setTimeout(() => done(() => reject(new Error(`${JSON.stringify(text)} did not appear within ${deadlineMs} ms:\n${this.output}`))), deadlineMs);
      const done = (fn) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        fn();
      };
      this.waiters.add(check);
      check();
    });
  }

  /** The dev cluster's URL, once it printed it. */
  async apiUrl() {
    await this.waitFor("Dev cluster is serving on ");
    return this.output.match(/Dev cluster is serving on (http:\/\/[^\s]+?)\.?\s/)[1];
  }

  /** A request to the dev cluster's API: status, headers and the JSON body. */
  async api(method, apiPath, body) {
    const response = await fetch(`${await this.apiUrl()}${apiPath}`, {
      method, headers: { "content-type": method === "PATCH" ? "application/merge-patch+json" : "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined };
  }

  /** Waits until GET `apiPath` answers something `predicate` accepts; returns it. */
  async waitGet(what, apiPath, predicate, deadlineMs = DEADLINE_MS) {
    const deadline = Date.now() + deadlineMs;
    let last;
    for (;;) {
      last = await this.api("GET", apiPath);
      if (predicate(last)) return last;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last seen: ${JSON.stringify(last.body)}\n${this.output}`);
      await new Promise((resolve) => setTimeout(resolve, 100)); // a poll interval, not a synchronisation
    }
  }

  /** Stops bosun with SIGINT, as Ctrl-C; waits for its exit (killed after the deadline). */
  async stop() {
    if (this.process.exitCode === null && this.process.signalCode === null) this.process.kill("SIGINT");
    const timer = setTimeout(() => this.process.kill("SIGKILL"), DEADLINE_MS);
    const exit = await this.exited;
    clearTimeout(timer);
    fs.rmSync(this.dir, { recursive: true, force: true });
    return exit;
  }
}
