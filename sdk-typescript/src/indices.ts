/**
 * In-memory indices of index handlers (Kopf's `@kopf.index`): what each object's handler call
 * returned, kept under that object and dropped when the controller says it is gone. A handler
 * returning `{key: value}` adds `value` under `key`; any other value is kept under `undefined`.
 */

/** One index: key → the values all objects put under it. */
export class Index {
  private readonly byObject = new Map<string, Map<unknown, unknown>>();

  /** Replaces what the object `objectKey` put into the index with `result`. */
  replace(objectKey: string, result: unknown): void {
    const entries = new Map<unknown, unknown>();
    if (typeof result === "object" && result !== null && !Array.isArray(result)) {
      for (const [k, v] of Object.entries(result)) entries.set(k, v);
    } else if (result !== undefined && result !== null) {
      entries.set(undefined, result);
    }
    if (entries.size > 0) this.byObject.set(objectKey, entries);
    else this.byObject.delete(objectKey);
  }

  /** Drops what the object `objectKey` put into the index. */
  forget(objectKey: string): void {
    this.byObject.delete(objectKey);
  }

  /** The values under `key`, of all objects. */
  get(key: unknown): unknown[] {
    const values: unknown[] = [];
    for (const entries of this.byObject.values()) if (entries.has(key)) values.push(entries.get(key));
    return values;
  }

  /** Whether any object put something under `key`. */
  has(key: unknown): boolean {
    return this.get(key).length > 0;
  }

  /** The keys, each once. */
  keys(): unknown[] {
    const keys = new Set<unknown>();
    for (const entries of this.byObject.values()) for (const k of entries.keys()) keys.add(k);
    return [...keys];
  }

  /** How many keys there are. */
  get size(): number {
    return this.keys().length;
  }
}
