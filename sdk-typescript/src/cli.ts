#!/usr/bin/env node
/**
 * `bosun-node FILE...` (`node dist/cli.js FILE...`): imports each handler file — `.js`, `.mjs`
 * and `.cjs` with `import()`, `.ts`/`.mts`/`.cts` through tsx — and serves what they registered
 * on `$BOSUN_LISTEN` until SIGTERM or SIGINT.
 */
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { serve } from "./serve";

const TYPESCRIPT = new Set([".ts", ".mts", ".cts", ".tsx"]);

/** Imports one handler file; it registers its handlers as it loads. */
export async function importHandlers(file: string): Promise<void> {
  const absolute = path.resolve(file);
  const url = pathToFileURL(absolute).href;
  if (TYPESCRIPT.has(path.extname(absolute))) {
    const { tsImport } = await import("tsx/esm/api");
    await tsImport(url, { parentURL: pathToFileURL(__filename).href });
  } else {
    await import(url);
  }
}

async function main(argv: string[]): Promise<number> {
  const files = argv.filter((a) => !a.startsWith("-"));
  if (files.length === 0 || argv.includes("--help") || argv.includes("-h")) {
    process.stderr.write("usage: bosun-node FILE...   (serves the handlers the files register on $BOSUN_LISTEN)\n");
    return files.length === 0 ? 2 : 0;
  }
  // A promise a handler left behind that fails is that handler's bug, not the server's end.
  process.on("unhandledRejection", (reason) => {
    process.stderr.write(`bosun-node: a promise no handler awaited failed: ${reason instanceof Error ? reason.stack ?? reason.message : String(reason)}\n`);
  });
  for (const file of files) await importHandlers(file);
  const running = await serve();
  // The signal handlers first: whoever reads the line below may signal at once.
  const stopped = new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      process.stdout.write(`Stopping (${signal}).\n`);
      running.stop().then(resolve, resolve);
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
  process.stdout.write(`Serving ${running.servicer.registry.handlers.length} handler(s) on ${running.address}.\n`);
  await stopped;
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`bosun-node: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`);
    process.exit(1);
  },
);
