package bosun

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// HandlerFunc is a handler: it gets the call's context and its Cause, and returns a result
// (stored at status.<id> unless nil; for probes, shown on the liveness endpoint) and an error
// (TemporaryError, PermanentError, or any other error: unexpected). For daemons, ctx is
// cancelled when the daemon is asked to stop.
type HandlerFunc func(ctx context.Context, c *Cause) (any, error)

// Operator is a handler server under construction: register handlers with the On* methods,
// then Serve. Registration mistakes (an invalid selector, a duplicate id, an option that does
// not fit its handler) are reported by Serve and Validate, never as panics.
//
// Like Kopf, a handler's id defaults to its function's name; a closure registered as the n-th
// handler of its kind is called `<kind>_fn` (n = 1) or `<kind>_fn_<n>`. Ids are stored on the
// objects, so prefer an explicit ID for anything long-lived. Handlers with a field (OnField,
// or the Field option of an update handler) get `/<field>` appended, as in Kopf.
type Operator struct {
	mu       sync.Mutex
	name     string
	handlers []*handler
	ignored  []resourcePaths
	owns     []resourcePaths
	settings *pb.OperatorSettings
}

type resourcePaths struct {
	resource string
	values   []string
}

// New returns an operator with no handlers.
func New() *Operator { return &Operator{} }

// ServerName names this server in the controller's logs (default: the executable's name).
func (op *Operator) ServerName(name string) { op.mu.Lock(); op.name = name; op.mu.Unlock() }

// Settings gives the controller operator settings when it describes this server (Kopf's
// `settings` given to kopf.operator): applied before those of the startup handlers, which win.
// Unset fields leave the controller's own values.
func (op *Operator) Settings(settings *pb.OperatorSettings) {
	op.mu.Lock()
	op.settings = settings
	op.mu.Unlock()
}

// IgnoredFields leaves these dotted paths of a resource out of change detection (for
// example `spec.replicas` when an autoscaler owns it).
func (op *Operator) IgnoredFields(resource string, paths ...string) {
	op.mu.Lock()
	op.ignored = append(op.ignored, resourcePaths{resource, paths})
	op.mu.Unlock()
}

// Owns declares the kinds a resource's handlers create as children: the controller needs
// nothing of it to run, but `bosun rbac` grants get, create and patch on them.
func (op *Operator) Owns(resource string, kinds ...string) {
	op.mu.Lock()
	op.owns = append(op.owns, resourcePaths{resource, kinds})
	op.mu.Unlock()
}

// OnCreate registers a creation handler (Kopf's @kopf.on.create).
func (op *Operator) OnCreate(resource string, fn HandlerFunc, opts ...Option) {
	op.register(pb.HandlerKind_HANDLER_KIND_CREATE, resource, "", fn, opts)
}

// OnUpdate registers an update handler (Kopf's @kopf.on.update): Old, New and Diff are set.
func (op *Operator) OnUpdate(resource string, fn HandlerFunc, opts ...Option) {
	op.register(pb.HandlerKind_HANDLER_KIND_UPDATE, resource, "", fn, opts)
}

// OnDelete registers a deletion handler (Kopf's @kopf.on.delete); the controller adds a
// finalizer so that it runs before the object goes, unless the handler is Optional.
func (op *Operator) OnDelete(resource string, fn HandlerFunc, opts ...Option) {
	op.register(pb.HandlerKind_HANDLER_KIND_DELETE, resource, "", fn, opts)
}

// OnResume registers a resuming handler (Kopf's @kopf.on.resume): called for existing objects
// when the controller first sees them unchanged.
func (op *Operator) OnResume(resource string, fn HandlerFunc, opts ...Option) {
	op.register(pb.HandlerKind_HANDLER_KIND_RESUME, resource, "", fn, opts)
}

// OnField registers a field handler (Kopf's @kopf.on.field): called when the value at the
// dotted path field changes, on creation too; Old and New are the field's values. Its id gets
// `/<field>` appended.
func (op *Operator) OnField(resource, field string, fn HandlerFunc, opts ...Option) {
	op.register(pb.HandlerKind_HANDLER_KIND_FIELD, resource, field, fn, opts)
}

// OnEvent registers a raw event handler (Kopf's @kopf.on.event): called for every watch
// event, the initial listing included; nothing is stored, failures are only logged.
func (op *Operator) OnEvent(resource string, fn HandlerFunc, opts ...Option) {
	op.register(pb.HandlerKind_HANDLER_KIND_EVENT, resource, "", fn, opts)
}

// OnTimer registers a timer (Kopf's @kopf.timer): called every interval for each object while
// it exists and matches. Refine it with Idle, InitialDelay and Sharp.
func (op *Operator) OnTimer(resource string, interval time.Duration, fn HandlerFunc, opts ...Option) {
	timer := &pb.TimerOptions{IntervalSeconds: interval.Seconds()}
	opts = append([]Option{func(h *handler) { h.timer = timer }}, opts...)
	op.register(pb.HandlerKind_HANDLER_KIND_TIMER, resource, "", fn, opts)
}

// OnDaemon registers a daemon (Kopf's @kopf.daemon): run for each object for as long as it
// exists and matches. Its ctx is cancelled when it is asked to stop (the object is deleted or
// stops matching, or the controller stops): return then. Returning ends the daemon for that
// object, unless it failed temporarily (then it is restarted after a delay).
func (op *Operator) OnDaemon(resource string, fn HandlerFunc, opts ...Option) {
	opts = append([]Option{func(h *handler) { h.daemon = &pb.DaemonOptions{} }}, opts...)
	op.register(pb.HandlerKind_HANDLER_KIND_DAEMON, resource, "", fn, opts)
}

// Index registers an index handler (Kopf's @kopf.index): called for every watch event of
// the resource's objects, its result is kept in this server's memory under the object and
// read by any handler with Cause.Index(id). A map result puts each value under its key; nil
// keeps what the object had; anything else goes under the key "". Unexpected errors are
// ignored by default (the object keeps its stale values), as in Kopf.
func (op *Operator) Index(resource string, fn HandlerFunc, opts ...Option) {
	opts = append([]Option{Errors(ErrorsIgnored)}, opts...)
	op.register(pb.HandlerKind_HANDLER_KIND_INDEX, resource, "", fn, opts)
}

// OnStartup registers a startup activity (Kopf's @kopf.on.startup): run once when the
// controller starts; all must succeed before it watches anything. Its cause has no object.
func (op *Operator) OnStartup(fn HandlerFunc, opts ...Option) {
	op.register(pb.HandlerKind_HANDLER_KIND_STARTUP, "", "", fn, opts)
}

// OnCleanup registers a cleanup activity (Kopf's @kopf.on.cleanup): run once when the
// controller exits.
func (op *Operator) OnCleanup(fn HandlerFunc, opts ...Option) {
	op.register(pb.HandlerKind_HANDLER_KIND_CLEANUP, "", "", fn, opts)
}

// OnProbe registers a probe (Kopf's @kopf.on.probe): run on each liveness check; its result
// is shown under its id in the liveness endpoint's JSON.
func (op *Operator) OnProbe(fn HandlerFunc, opts ...Option) {
	op.register(pb.HandlerKind_HANDLER_KIND_PROBE, "", "", fn, opts)
}

// OnValidate registers a validating admission handler (Kopf's @kopf.on.validate): returning
// no error allows the request, an error denies it with its message (a PermanentError may set
// the HTTP code).
func (op *Operator) OnValidate(resource string, fn HandlerFunc, opts ...Option) {
	opts = append([]Option{func(h *handler) { h.admission = &pb.AdmissionOptions{} }}, opts...)
	op.register(pb.HandlerKind_HANDLER_KIND_VALIDATE, resource, "", fn, opts)
}

// OnMutate registers a mutating admission handler (Kopf's @kopf.on.mutate): like a validating
// one, and its Patch is applied to the object under review.
func (op *Operator) OnMutate(resource string, fn HandlerFunc, opts ...Option) {
	opts = append([]Option{func(h *handler) { h.admission = &pb.AdmissionOptions{} }}, opts...)
	op.register(pb.HandlerKind_HANDLER_KIND_MUTATE, resource, "", fn, opts)
}

func (op *Operator) register(kind pb.HandlerKind, resource, field string, fn HandlerFunc, opts []Option) {
	op.mu.Lock()
	defer op.mu.Unlock()
	h := &handler{
		kind:     kind,
		resource: resource,
		field:    field,
		filters:  &pb.Filters{},
		options:  &pb.HandlerOptions{},
		fn:       fn,
	}
	h.id = funcName(fn)
	if h.id == "" {
		n := 1
		for _, other := range op.handlers {
			if other.kind == kind {
				n++
			}
		}
		h.id = kindName(kind) + "_fn"
		if n > 1 {
			h.id = fmt.Sprintf("%s_%d", h.id, n)
		}
	}
	for _, opt := range opts {
		opt(h)
	}
	op.handlers = append(op.handlers, h)
}

// Validate checks the registrations as Serve does.
func (op *Operator) Validate() error {
	_, err := op.build()
	return err
}

func (op *Operator) build() (*registry, error) {
	op.mu.Lock()
	defer op.mu.Unlock()
	reg, err := newRegistry(op.name, op.handlers, op.ignored, op.owns)
	if reg != nil {
		reg.settings = op.settings
	}
	return reg, err
}

var closureName = regexp.MustCompile(`^func\d+$`)

// funcName is a named function's name (`create_fn` for `main.create_fn`); "" for closures.
func funcName(fn HandlerFunc) string {
	if fn == nil {
		return ""
	}
	f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer())
	if f == nil {
		return ""
	}
	full := f.Name()
	full = full[strings.LastIndex(full, "/")+1:]
	parts := strings.Split(strings.TrimSuffix(full, "-fm"), ".")
	last := parts[len(parts)-1]
	if len(parts) < 2 || closureName.MatchString(last) {
		return ""
	}
	return last
}

func kindName(kind pb.HandlerKind) string {
	name := strings.ToLower(strings.TrimPrefix(kind.String(), "HANDLER_KIND_"))
	if kind == pb.HandlerKind_HANDLER_KIND_UNSPECIFIED {
		return "handler"
	}
	return name
}
