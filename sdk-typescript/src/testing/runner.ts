/**
 * `testing.Runner`: Kopf's `KopfRunner` for Bosun. It runs the `bosun` binary with the given
 * arguments in the background of a test — `["dev", "--apply", "crd.yaml", "handlers.ts"]` on
 * an embedded dev cluster, or `["run", …]` against `$KUBECONFIG` — and collects what it prints
 * (the handler server's lines included).
 *
 * ```js
 * const runner = await new testing.Runner(["dev", "--apply", "crd.yaml", "handlers.ts"]).start();
 * t.after(() => runner.stop());
 * await runner.waitFor("Handler 'create_fn' succeeded.");
 * ```
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

/** No `bosun` binary was found; `tried` lists where it was looked for. */
export class BosunNotFound extends Error {
  constructor(readonly tried: string[]) {
    super(`no bosun binary found; tried: ${tried.join("; ")}. Give { bosun: "/path/to/bosun" }, set BOSUN_BINARY, `
      + "put bosun on the PATH, or build it (cargo build -p bosun-controller --bin bosun)");
    this.name = "BosunNotFound";
  }
}

function isFile(file: string): boolean {
  try {
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The `bosun` binary: `explicit` (the `bosun` option), else `$BOSUN_BINARY`, else `bosun` on
 * the PATH, else `target/debug/bosun` in `cwd` or a folder above it. Throws `BosunNotFound`
 * naming what it tried. */
export function bosunBinary(options: { bosun?: string; cwd?: string; env?: NodeJS.ProcessEnv } = {}): string {
  const env = options.env ?? process.env;
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const tried: string[] = [];
  if (options.bosun) {
    const file = path.resolve(cwd, options.bosun);
    if (isFile(file)) return file;
    throw new BosunNotFound([`the bosun option ${file} (no such file)`]);
  }
  tried.push("the bosun option (not given)");
  if (env.BOSUN_BINARY) {
    const file = path.resolve(cwd, env.BOSUN_BINARY);
    if (isFile(file)) return file;
    throw new BosunNotFound([...tried, `$BOSUN_BINARY=${env.BOSUN_BINARY} (no such file)`]);
  }
  tried.push("$BOSUN_BINARY (unset)");
  const dirs = (env.PATH ?? "").split(path.delimiter).filter(Boolean);
  for (const dir of dirs) {
    const file = path.resolve(dir, "bosun");
    if (isFile(file)) {
      try {
        fs.accessSync(file, fs.constants.X_OK);
        return file;
      } catch {
        // Not executable: go on looking.
      }
    }
  }
  tried.push(`bosun on the PATH (${dirs.length} folder(s))`);
  for (let dir = cwd; ; dir = path.dirname(dir)) {
    const file = path.join(dir, "target", "debug", "bosun");
    if (isFile(file)) return file;
    if (path.dirname(dir) === dir) break;
  }
  tried.push(`target/debug/bosun in ${cwd} and the folders above it`);
  throw new BosunNotFound(tried);
}

/** How the Runner runs bosun. */
export interface RunnerOptions {
  /** The bosun binary; default: see `bosunBinary`. */
  bosun?: string;
  cwd?: string;
  /** The environment; default `process.env`. `NO_COLOR=1` is added, and `BOSUN_NODE` (the
   * Node.js that serves handler files) is this process's node unless set. */
  env?: NodeJS.ProcessEnv;
  /** Default deadline of `waitFor`; default 60 s. */
  timeoutMs?: number;
  /** How long `stop()` waits after SIGINT before SIGKILL; default 30 s. */
  graceMs?: number;
}

/** How bosun exited. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** `bosun ARGS…` running in the background, with its output. For `dev` without `--dir`, the
 * dev cluster gets a temporary folder (`dir`), removed by `stop()`. */
export class Runner {
  readonly args: string[];
  /** The dev cluster's folder (`--dir`), for `dev`. */
  readonly dir: string | undefined;
  private readonly options: RunnerOptions;
  private child: ChildProcess | undefined;
  private text = "";
  private readonly waiters = new Set<() => void>();
  private exitInfo: Exit | undefined;
  private exited: Promise<Exit> | undefined;
  private tempDir: string | undefined;

  constructor(args: readonly string[], options: RunnerOptions = {}) {
    if (!Array.isArray(args) || args.some((a) => typeof a !== "string")) throw new TypeError("bosun testing: Runner takes an array of string arguments, as bosun's command line");
    this.options = options;
    this.args = [...args];
    const env = options.env ?? process.env;
    if (this.args[0] === "dev") {
      const given = this.args.findIndex((a) => a === "--dir" || a.startsWith("--dir="));
      if (given >= 0) {
        this.dir = this.args[given].startsWith("--dir=") ? this.args[given].slice("--dir=".length) : this.args[given + 1];
      } else if (env.BOSUN_DEV_DIR) {
        this.dir = env.BOSUN_DEV_DIR;
      } else {
        this.tempDir = fs.mkdtempSync(path.join(os.tmpdir(), "bosun-runner-"));
        this.dir = this.tempDir;
        this.args.splice(1, 0, "--dir", this.tempDir);
      }
    }
  }

  /** Everything bosun printed so far (stdout and stderr). */
  get output(): string {
    return this.text;
  }

  /** Its exit code once it exited (null before, or when a signal ended it). */
  get exitCode(): number | null {
    return this.exitInfo?.code ?? null;
  }

  /** How it exited; undefined while it runs. */
  get exit(): Exit | undefined {
    return this.exitInfo;
  }

  /** The dev cluster's kubeconfig, once bosun printed `export KUBECONFIG=…`. */
  get kubeconfig(): string | undefined {
    return /^export KUBECONFIG=(.*)$/m.exec(this.text)?.[1];
  }

  /** How often `text` occurs in the output so far. */
  count(text: string): number {
    return text ? this.text.split(text).length - 1 : 0;
  }

  /** Starts bosun; resolves once it runs, rejects when it cannot start (naming the binary). */
  async start(): Promise<this> {
    if (this.child) throw new Error("bosun testing: this Runner was started already");
    const binary = bosunBinary({ bosun: this.options.bosun, cwd: this.options.cwd, env: this.options.env });
    const env: NodeJS.ProcessEnv = { ...(this.options.env ?? process.env), NO_COLOR: "1" };
    if (!env.BOSUN_NODE) env.BOSUN_NODE = process.execPath;
    const child = spawn(binary, this.args, { cwd: this.options.cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    this.child = child;
    for (const stream of [child.stdout!, child.stderr!]) {
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => {
        this.text += chunk;
        this.notify();
      });
    }
    // "close": the process exited and its output was read to the end.
    this.exited = new Promise((resolve) => child.on("close", (code, signal) => {
      this.exitInfo = { code, signal };
      this.cleanup();
      this.notify();
      resolve(this.exitInfo);
    }));
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", (e) => reject(new Error(`bosun testing: cannot start ${binary}: ${e.message}`)));
    });
    return this;
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  /** Waits until `text` occurs `count` times in the output (or a RegExp matches it); resolves
   * with the output so far. Fails, with the output, after `timeoutMs` (default: the runner's,
   * else 60 s) or when bosun exited first. */
  waitFor(text: string | RegExp, { timeoutMs, count = 1 }: { timeoutMs?: number; count?: number } = {}): Promise<string> {
    if (!this.child) return Promise.reject(new Error("bosun testing: start() the Runner before waitFor()"));
    const deadline = timeoutMs ?? this.options.timeoutMs ?? 60_000;
    const found = () => (typeof text === "string" ? this.count(text) >= count : text.test(this.text));
    return new Promise((resolve, reject) => {
      const finish = (fn: () => void) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        fn();
      };
      const check = () => {
        if (found()) return finish(() => resolve(this.text));
        if (this.exitInfo) finish(() => reject(new Error(`bosun exited (${JSON.stringify(this.exitInfo)}) before printing ${String(text)}; its output:\n${this.text}`)));
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`${String(text)} did not appear within ${deadline} ms; bosun's output:\n${this.text}`))), deadline);
      this.waiters.add(check);
      check();
    });
  }

  /** Stops bosun as Ctrl-C does (SIGINT) and waits for it to exit; SIGKILL after `graceMs`.
   * Safe to call more than once, or before `start()`. */
  async stop(): Promise<Exit | undefined> {
    if (!this.child || !this.exited) {
      this.cleanup();
      return undefined;
    }
    if (!this.exitInfo) this.child.kill("SIGINT");
    const grace = this.options.graceMs ?? 30_000;
    const timer = setTimeout(() => this.child!.kill("SIGKILL"), grace);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** `await using runner = await new Runner(…).start()` stops it at the block's end. */
  async [(Symbol as any).asyncDispose ?? Symbol.for("Symbol.asyncDispose")](): Promise<void> {
    await this.stop();
  }

  private cleanup(): void {
    if (this.tempDir) fs.rmSync(this.tempDir, { recursive: true, force: true });
    this.tempDir = undefined;
  }
}

/** For a test that needs bosun: true when `bosunBinary()` finds it. Otherwise the test fails
 * under CI (`CI` set and not "0"/"false"), and elsewhere is skipped with the reason (also
 * written to stderr): never a silent pass. `t` is node:test's TestContext. */
export function requireBosun(t: { name: string; skip(message?: string): void }, options: { bosun?: string; cwd?: string } = {}): boolean {
  try {
    bosunBinary(options);
    return true;
  } catch (e) {
    if (!(e instanceof BosunNotFound)) throw e;
    const ci = process.env.CI;
    if (ci && !["0", "false"].includes(ci)) throw new Error(`${e.message}; under CI (CI=${ci}) that fails the test`);
    process.stderr.write(`SKIPPED ${t.name}: ${e.message} (under CI=true this fails)\n`);
    t.skip(`${e.message} (under CI=true this fails)`);
    return false;
  }
}
