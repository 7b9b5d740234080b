/**
 * The operator settings startup handlers may change (Kopf's `settings` kwarg of
 * `on.startup`), as a plain object, and their translation into the contract's
 * `OperatorSettings` (pure). Unset fields leave the controller's own values.
 */
import type { OperatorSettings as ContractSettings } from "./generated/bosun/v1/OperatorSettings";
import type { StateStorage } from "./generated/bosun/v1/StateStorage";

/** Where one kind of state is kept (Kopf's progress and diffbase storages). */
export type StorageSettings =
  | { kind: "annotations"; prefix?: string; v1?: boolean; key?: string }
  | { kind: "status"; field?: string };

/** How admission webhooks are served (Kopf's `WebhookServer`); `{}` is the controller's default. */
export interface WebhookServerSettings {
  /** `host:port` to listen on. */
  listen?: string;
  host?: string;
  certfile?: string;
  pkeyfile?: string;
  cafile?: string;
}

/** The settings a startup handler may change, by Kopf's names in camelCase. */
export interface OperatorSettings {
  persistence: { finalizer?: string; progressStorage?: StorageSettings; diffbaseStorage?: StorageSettings };
  posting: { enabled?: boolean; loggers?: boolean; level?: "debug" | "info" | "warning" | "error" };
  watching: { serverTimeout?: number };
  execution: { maxWorkers?: number };
  peering: { name?: string; priority?: number; standalone?: boolean; mandatory?: boolean };
  /** `managed`: the name of the webhook configurations the controller keeps. */
  admission: { managed?: string; server?: WebhookServerSettings };
}

/** Fresh, empty settings for one startup call. */
export function newSettings(): OperatorSettings {
  return { persistence: {}, posting: {}, watching: {}, execution: {}, peering: {}, admission: {} };
}

const LEVELS = { debug: "LEVEL_DEBUG", info: "LEVEL_INFO", warning: "LEVEL_WARNING", error: "LEVEL_ERROR" } as const;

function storage(value: StorageSettings | undefined): StateStorage | undefined {
  if (!value) return undefined;
  if (value.kind === "status") return { kind: "KIND_STATUS", field: value.field ?? "" };
  return { kind: "KIND_ANNOTATIONS", prefix: value.prefix ?? "", v1: !!value.v1, key: value.key ?? "" };
}

/** The contract's settings for what was set; undefined when nothing was. */
export function toContract(settings: OperatorSettings): ContractSettings | undefined {
  const out: ContractSettings = {};
  const set = <K extends keyof ContractSettings>(key: K, value: ContractSettings[K] | undefined) => {
    if (value !== undefined) out[key] = value;
  };
  set("finalizer", settings.persistence?.finalizer);
  set("progress_storage", storage(settings.persistence?.progressStorage));
  set("diffbase_storage", storage(settings.persistence?.diffbaseStorage));
  set("posting_enabled", settings.posting?.enabled);
  set("posting_loggers", settings.posting?.loggers);
  set("posting_level", settings.posting?.level ? LEVELS[settings.posting.level] : undefined);
  set("watching_server_timeout_seconds", settings.watching?.serverTimeout);
  set("max_workers", settings.execution?.maxWorkers);
  set("peering_name", settings.peering?.name);
  set("peering_priority", settings.peering?.priority);
  set("peering_standalone", settings.peering?.standalone);
  set("peering_mandatory", settings.peering?.mandatory);
  set("admission_managed", settings.admission?.managed);
  const server = settings.admission?.server;
  if (server) {
    set("admission_server", { listen: server.listen ?? "", host: server.host ?? "", certfile: server.certfile ?? "", pkeyfile: server.pkeyfile ?? "", cafile: server.cafile ?? "" });
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
