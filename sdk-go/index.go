package bosun

import (
	"sort"
	"sync"
	"time"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// FlatKey is the key (Kopf's None) under which results that are not maps are indexed.
const FlatKey = ""

// Index is one in-memory index (Kopf's @kopf.index): keys → the values the objects put
// there. The controller sends each index handler every watch event of its objects, the first
// listing included, before any other handler runs; a deleted object, or one that stops
// matching, is dropped. Failures follow Kopf: an ignored error (the default) keeps the
// object's stale values; a permanent one drops them and leaves the object out for good; a
// temporary one drops them and leaves it out until its delay (or the backoff) has passed.
type Index struct {
	mu       sync.RWMutex
	byKey    map[string]map[string]any // key → object → value
	byObject map[string][]string       // object → its keys
	until    map[string]time.Time      // object → left out until (zero: for good)
}

// Index is the index filled by the index handler id (Kopf's indices kwargs); nil when this
// server has no such index handler.
func (c *Cause) Index(id string) *Index { return c.indices.get(id) }

// Get returns the values under key, in the order of their objects.
func (x *Index) Get(key string) []any {
	x.mu.RLock()
	defer x.mu.RUnlock()
	objects := make([]string, 0, len(x.byKey[key]))
	for object := range x.byKey[key] {
		objects = append(objects, object)
	}
	sort.Strings(objects)
	values := make([]any, 0, len(objects))
	for _, object := range objects {
		values = append(values, x.byKey[key][object])
	}
	return values
}

// Keys returns the keys, sorted.
func (x *Index) Keys() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	keys := make([]string, 0, len(x.byKey))
	for key := range x.byKey {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// Len is the number of keys.
func (x *Index) Len() int { x.mu.RLock(); defer x.mu.RUnlock(); return len(x.byKey) }

func (x *Index) excluded(object string, now time.Time) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	until, ok := x.until[object]
	return ok && (until.IsZero() || now.Before(until))
}

func (x *Index) forget(object string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.remove(object)
	delete(x.until, object)
}

func (x *Index) remove(object string) {
	for _, key := range x.byObject[object] {
		delete(x.byKey[key], object)
		if len(x.byKey[key]) == 0 {
			delete(x.byKey, key)
		}
	}
	delete(x.byObject, object)
}

// apply puts a call's result in the index, or applies its failure; the server's answer for
// the call follows (the controller records nothing for index handlers).
func (x *Index) apply(options *pb.HandlerOptions, object string, result any, r ran, now time.Time) ran {
	x.mu.Lock()
	defer x.mu.Unlock()
	outcome := r.outcome
	if outcome == pb.Outcome_OUTCOME_UNEXPECTED_ERROR {
		switch options.GetErrors() {
		case pb.ErrorsMode_ERRORS_MODE_IGNORED:
			return r // the stale values stay
		case pb.ErrorsMode_ERRORS_MODE_PERMANENT:
			outcome = pb.Outcome_OUTCOME_PERMANENT_ERROR
		default:
			outcome = pb.Outcome_OUTCOME_TEMPORARY_ERROR
		}
	}
	switch outcome {
	case pb.Outcome_OUTCOME_SUCCESS:
		delete(x.until, object)
		if result == nil {
			return r
		}
		x.remove(object)
		entries, isMap := result.(map[string]any)
		if !isMap {
			entries = map[string]any{FlatKey: result}
		}
		for key, value := range entries {
			if x.byKey[key] == nil {
				x.byKey[key] = map[string]any{}
			}
			x.byKey[key][object] = value
			x.byObject[object] = append(x.byObject[object], key)
		}
	case pb.Outcome_OUTCOME_PERMANENT_ERROR:
		x.remove(object)
		x.until[object] = time.Time{}
	case pb.Outcome_OUTCOME_TEMPORARY_ERROR:
		x.remove(object)
		delay := 60.0
		if r.delay != nil {
			delay = *r.delay
		} else if options.BackoffSeconds != nil {
			delay = options.GetBackoffSeconds()
		}
		x.until[object] = now.Add(time.Duration(delay * float64(time.Second)))
	}
	return r
}

// indices are the server's indices, by handler id.
type indices struct {
	byID map[string]*Index
}

func newIndices() *indices { return &indices{byID: map[string]*Index{}} }

func (i *indices) add(id string) {
	i.byID[id] = &Index{byKey: map[string]map[string]any{}, byObject: map[string][]string{}, until: map[string]time.Time{}}
}

func (i *indices) get(id string) *Index {
	if i == nil {
		return nil
	}
	return i.byID[id]
}

func (i *indices) any() bool { return len(i.byID) > 0 }
