/**
 * The gRPC transport around the Servicer: `bosun.v1.HandlerServer` and `grpc.health.v1`
 * (service `""` SERVING) on the address `BOSUN_LISTEN` gives. `serve` takes its listen address
 * from its caller and returns a handle to stop it, so that tests bind port 0.
 */
import * as grpc from "@grpc/grpc-js";
import { contract } from "./proto";
import { defaultRegistry, type Registry } from "./registry";
import { NoSuchHandler, Servicer, Unavailable } from "./servicer";

/** The environment variable `bosun dev`/`bosun run` put the listen address in. */
export const LISTEN_ENV = "BOSUN_LISTEN";
/** Where the server listens when nothing says otherwise. */
export const DEFAULT_LISTEN = "127.0.0.1:50051";

/** `BOSUN_LISTEN` (or `value`) as grpc-js wants it: `host:port` or `unix:///path`. */
export function listenAddress(value?: string): string {
  let address = (value ?? process.env[LISTEN_ENV] ?? "").trim() || DEFAULT_LISTEN;
  if (address.startsWith("http://")) address = address.slice("http://".length);
  if (address.startsWith("unix:")) return address;
  if (address.startsWith("https://") || !address.includes(":")) {
    throw new Error(`invalid listen address "${address}": expected host:port, http://host:port or unix:///path`);
  }
  return address;
}

/** A running handler server. */
export interface Running {
  /** Where it listens, with the bound port (`127.0.0.1:46453`). */
  address: string;
  /** The bound port (0 for a Unix socket). */
  port: number;
  servicer: Servicer;
  /** Stops it: daemons are asked to stop, in-flight calls get `graceSeconds` to finish. */
  stop(graceSeconds?: number): Promise<void>;
}

/** Options of `serve`. */
export interface ServeOptions {
  registry?: Registry;
  /** `host:port` (port 0: any free port) or `unix:///path`; default `BOSUN_LISTEN`. */
  listen?: string;
  serverName?: string;
}

function unary<Req, Res>(fn: (request: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res> | Res): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    Promise.resolve()
      .then(() => fn(call.request, call))
      .then(
        (response) => callback(null, response),
        (error) => {
          const code = error instanceof NoSuchHandler ? grpc.status.NOT_FOUND : error instanceof Unavailable ? grpc.status.UNAVAILABLE : grpc.status.INTERNAL;
          callback({ code, details: error instanceof Error ? error.message : String(error) });
        },
      );
  };
}

function traceparentOf(call: grpc.ServerUnaryCall<any, any>): string | undefined {
  const value = call.metadata.get("traceparent")[0];
  return value === undefined ? undefined : String(value);
}

/** Serves the registry's handlers (default: everything `bosun.on.*` registered). */
export async function serve(options: ServeOptions = {}): Promise<Running> {
  const registry = options.registry ?? defaultRegistry();
  if (registry.handlers.length === 0) {
    throw new Error("no handlers are registered: register functions with bosun.on.create(...) and the like");
  }
  const address = listenAddress(options.listen);
  const { bosun, health } = contract();
  const servicer = new Servicer(registry, options.serverName);
  const server = new grpc.Server();
  server.addService(bosun.v1.HandlerServer.service, {
    Describe: unary(() => servicer.describe()),
    Handle: unary((request: any, call) => servicer.handle(request, traceparentOf(call))),
    Activity: unary((request: any) => servicer.activity(request)),
    Admit: unary((request: any) => servicer.admit(request)),
    StopDaemon: unary((request: any) => servicer.stopDaemon(request)),
    Daemon: (call: grpc.ServerWritableStream<any, any>) => {
      const cancelled = new AbortController();
      call.on("cancelled", () => cancelled.abort());
      const send = (message: any) => {
        if (!call.cancelled && !call.destroyed) call.write(message);
      };
      servicer
        .daemon(call.request, send, cancelled.signal)
        .catch((e) => send({ exit: { outcome: "OUTCOME_UNEXPECTED_ERROR", message: e instanceof Error ? e.stack ?? e.message : String(e) } }))
        .finally(() => {
          if (!call.cancelled && !call.destroyed) call.end();
        });
    },
  });
  const SERVING = new Set(["", "bosun.v1.HandlerServer"]);
  const healthService = (health.Health as any).service as grpc.ServiceDefinition;
  server.addService(healthService, {
    Check: (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
      if (SERVING.has(call.request.service)) callback(null, { status: "SERVING" });
      else callback({ code: grpc.status.NOT_FOUND, details: `unknown service "${call.request.service}"` });
    },
    Watch: (call: grpc.ServerWritableStream<any, any>) => {
      call.write({ status: SERVING.has(call.request.service) ? "SERVING" : "SERVICE_UNKNOWN" });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(new Error(`cannot listen on ${address}: ${error.message}`)) : resolve(bound))),
  );
  const shown = address.startsWith("unix:") ? address : `${address.slice(0, address.lastIndexOf(":"))}:${port}`;
  let stopped: Promise<void> | undefined;
  return {
    address: shown,
    port: address.startsWith("unix:") ? 0 : port,
    servicer,
    stop(graceSeconds = 5) {
      stopped ??= new Promise<void>((resolve) => {
        servicer.stopAllDaemons();
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceSeconds * 1000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      return stopped;
    },
  };
}
