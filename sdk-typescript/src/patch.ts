/**
 * The `patch` kwarg: a JSON merge patch that handlers fill in place, Kopf's way
 * (`patch.status.x = 1`, `patch.metadata.labels.y = null`). Its sections `spec`, `status` and
 * `metadata` (alias `meta`), and `metadata.labels`/`metadata.annotations`, spring into being on
 * first access; sections left empty are pruned before it is sent.
 */

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The metadata section of a patch. */
export interface MetaPatch {
  labels: Record<string, string | null>;
  annotations: Record<string, string | null>;
  [key: string]: any;
}

/** A JSON merge patch of the handled object. */
export interface Patch {
  spec: Record<string, any>;
  status: Record<string, any>;
  metadata: MetaPatch;
  /** The same as `metadata`. */
  meta: MetaPatch;
  [key: string]: any;
}

const SECTIONS = new Set(["spec", "status", "metadata"]);
const META_SECTIONS = new Set(["labels", "annotations"]);

function isObject(value: unknown): value is Record<string, any> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function vivifying(target: Record<string, any>, sections: Set<string>, wrap: (key: string, v: any) => any): any {
  return new Proxy(target, {
    get(t, key, receiver) {
      if (typeof key !== "string") return Reflect.get(t, key, receiver);
      const name = key === "meta" && sections.has("metadata") ? "metadata" : key;
      if (sections.has(name) && !isObject(t[name])) t[name] = {};
      return wrap(name, t[name]);
    },
    set(t, key, value) {
      const name = key === "meta" && sections.has("metadata") ? "metadata" : key;
      t[name as string] = value;
      return true;
    },
  });
}

/** A new, empty patch. */
export function newPatch(): Patch {
  return vivifying({}, SECTIONS, (name, value) =>
    name === "metadata" && isObject(value) ? vivifying(value, META_SECTIONS, (_, v) => v) : value,
  ) as Patch;
}

/** The patch without empty objects (what was only looked at, never set); `undefined` when
 * nothing is left. Nulls stay: they delete. */
export function prune(value: unknown): Record<string, Json> | undefined {
  if (!isObject(value)) return undefined;
  const pruned = pruneValue(value);
  return isObject(pruned) && Object.keys(pruned).length > 0 ? (pruned as Record<string, Json>) : undefined;
}

function pruneValue(value: unknown): unknown {
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    const pruned = pruneValue(item);
    if (isObject(pruned) && Object.keys(pruned).length === 0) continue;
    if (pruned === undefined) continue;
    out[key] = pruned;
  }
  return out;
}
