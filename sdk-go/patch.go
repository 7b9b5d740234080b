package bosun

import "sync"

// Patch is the patch a handler accumulates while it runs (Kopf's `patch` kwarg): one JSON
// merge patch (RFC 7386), plus JSON-patch operations (RFC 6902) for what a merge patch cannot
// say. The controller merges it with the other handlers' patches of the same cycle and writes
// everything in one request. A nil value deletes: RemoveLabel is Set(nil, …).
//
// It is safe for concurrent use. In daemons, each change is sent to the controller at once.
type Patch struct {
	mu    sync.Mutex
	merge map[string]any
	ops   []any
	// live, for daemons: takes every change at once (and the patch stays empty).
	live func(merge map[string]any, ops []any)
}

// Merge merges a merge-patch fragment into the patch, as if both were applied in turn: maps
// merge key by key, anything else (nil included, which deletes) replaces.
func (p *Patch) Merge(fragment map[string]any) *Patch {
	p.mu.Lock()
	if p.merge == nil {
		p.merge = map[string]any{}
	}
	mergeInto(p.merge, fragment)
	p.mu.Unlock()
	p.flushLive()
	return p
}

// Set sets the value at the path of keys (for example Set(3, "spec", "replicas")); nil
// deletes it.
func (p *Patch) Set(value any, path ...string) *Patch {
	if len(path) == 0 {
		if fragment, ok := value.(map[string]any); ok {
			return p.Merge(fragment)
		}
		return p
	}
	var fragment any = value
	for i := len(path) - 1; i >= 0; i-- {
		fragment = map[string]any{path[i]: fragment}
	}
	return p.Merge(fragment.(map[string]any))
}

// Status sets status.<key>.
func (p *Patch) Status(key string, value any) *Patch { return p.Set(value, "status", key) }

// Spec sets spec.<key>.
func (p *Patch) Spec(key string, value any) *Patch { return p.Set(value, "spec", key) }

// Label sets the label key (keys may contain dots and slashes).
func (p *Patch) Label(key, value string) *Patch { return p.Set(value, "metadata", "labels", key) }

// RemoveLabel removes the label key.
func (p *Patch) RemoveLabel(key string) *Patch { return p.Set(nil, "metadata", "labels", key) }

// Annotation sets the annotation key.
func (p *Patch) Annotation(key, value string) *Patch {
	return p.Set(value, "metadata", "annotations", key)
}

// RemoveAnnotation removes the annotation key.
func (p *Patch) RemoveAnnotation(key string) *Patch {
	return p.Set(nil, "metadata", "annotations", key)
}

// JSONOp appends a JSON-patch operation, applied after the merge patch, for example
// map[string]any{"op": "add", "path": "/spec/items/-", "value": "x"}.
func (p *Patch) JSONOp(operation map[string]any) *Patch {
	p.mu.Lock()
	p.ops = append(p.ops, deepCopy(operation))
	p.mu.Unlock()
	p.flushLive()
	return p
}

// MergePatch is a copy of the merge patch so far ({} when nothing was merged).
func (p *Patch) MergePatch() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	copied, _ := deepCopy(p.merge).(map[string]any)
	if copied == nil {
		copied = map[string]any{}
	}
	return copied
}

// JSONOps is a copy of the JSON-patch operations so far.
func (p *Patch) JSONOps() []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	ops, _ := deepCopy(p.ops).([]any)
	return ops
}

// IsEmpty says whether nothing was patched.
func (p *Patch) IsEmpty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.merge) == 0 && len(p.ops) == 0
}

// take empties the patch and returns it encoded: the merge patch and the JSON patch, each
// empty when unused.
func (p *Patch) take() (merge, ops []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.merge) > 0 {
		merge = mustJSON(p.merge)
	}
	if len(p.ops) > 0 {
		ops = mustJSON(p.ops)
	}
	p.merge, p.ops = nil, nil
	return merge, ops
}

// flushLive hands the accumulated change to a daemon's stream, when there is one.
func (p *Patch) flushLive() {
	if p.live == nil {
		return
	}
	p.mu.Lock()
	merge, ops := p.merge, p.ops
	p.merge, p.ops = nil, nil
	p.mu.Unlock()
	if len(merge) > 0 || len(ops) > 0 {
		p.live(merge, ops)
	}
}

// mergeInto applies fragment to target as merge patches combine: target then fragment.
func mergeInto(target, fragment map[string]any) {
	for key, value := range fragment {
		inner, isMap := value.(map[string]any)
		existing, hasMap := target[key].(map[string]any)
		if isMap && hasMap {
			mergeInto(existing, inner)
			continue
		}
		target[key] = deepCopy(value)
	}
}

// deepCopy copies maps and slices of JSON values, so that a patch never shares them with the
// handler's body or with what the handler keeps changing.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		copied := make(map[string]any, len(v))
		for k, inner := range v {
			copied[k] = deepCopy(inner)
		}
		return copied
	case []any:
		copied := make([]any, len(v))
		for i, inner := range v {
			copied[i] = deepCopy(inner)
		}
		return copied
	}
	return v
}
