package bosun

import (
	"time"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// Option refines the handler it is given to (Kopf's decorator arguments). Options that do not
// fit the handler's kind are reported by Serve and Validate.
type Option func(*handler)

// ErrorsMode says what unexpected errors (neither temporary nor permanent) of a handler mean.
type ErrorsMode int

// The errors modes (Kopf's ErrorsMode).
const (
	// ErrorsTemporary retries after the backoff (the default).
	ErrorsTemporary ErrorsMode = iota
	// ErrorsPermanent does not retry.
	ErrorsPermanent
	// ErrorsIgnored logs the error; the handler counts as succeeded.
	ErrorsIgnored
)

// Match is a condition on a label, an annotation or a field's value.
type Match struct {
	check int // 0: equals value; 1: present; 2: absent
	value any
}

var (
	// Present matches any value, null included.
	Present = Match{check: 1}
	// Absent matches when there is no value.
	Absent = Match{check: 2}
)

// Equals matches this JSON value (a string for labels and annotations).
func Equals(value any) Match { return Match{value: value} }

// matchOf takes a Match as it is, and any other value as Equals(value).
func matchOf(condition any) Match {
	if m, ok := condition.(Match); ok {
		return m
	}
	return Equals(condition)
}

func (m Match) proto() *pb.ValueFilter {
	switch m.check {
	case 1:
		return &pb.ValueFilter{Check: &pb.ValueFilter_Present{Present: true}}
	case 2:
		return &pb.ValueFilter{Check: &pb.ValueFilter_Absent{Absent: true}}
	}
	return &pb.ValueFilter{Check: &pb.ValueFilter_Equals{Equals: mustJSON(m.value)}}
}

// ID sets the handler's id (instead of its function's name).
func ID(id string) Option { return func(h *handler) { h.id = id } }

// Label matches objects whose label key matches: a string (equality), Present or Absent.
func Label(key string, condition any) Option {
	return func(h *handler) { h.filters.Labels = setFilter(h.filters.Labels, key, condition) }
}

// Annotation matches objects whose annotation key matches: a string, Present or Absent.
func Annotation(key string, condition any) Option {
	return func(h *handler) { h.filters.Annotations = setFilter(h.filters.Annotations, key, condition) }
}

func setFilter(filters map[string]*pb.ValueFilter, key string, condition any) map[string]*pb.ValueFilter {
	if filters == nil {
		filters = map[string]*pb.ValueFilter{}
	}
	filters[key] = matchOf(condition).proto()
	return filters
}

// Field is the dotted path that Value checks; for update handlers also: only changes of this
// field (Kopf's field=), and the id gets `/<field>` appended.
func Field(path string) Option {
	return func(h *handler) {
		if h.kind == pb.HandlerKind_HANDLER_KIND_UPDATE {
			h.field = path
		}
		h.filters.Field = path
	}
}

// Value matches objects whose Field matches (Kopf's value=): a JSON value, Present or Absent.
func Value(condition any) Option {
	return func(h *handler) { h.filters.Value = matchOf(condition).proto() }
}

// OldValue matches, for update and field handlers, changes whose old value matches.
func OldValue(condition any) Option {
	return func(h *handler) { h.filters.Old = matchOf(condition).proto() }
}

// NewValue matches, for update and field handlers, changes whose new value matches.
func NewValue(condition any) Option {
	return func(h *handler) { h.filters.New = matchOf(condition).proto() }
}

// When calls the handler only when the predicate holds for the cause (Kopf's when=); when it
// does not, nothing is recorded for the handler.
func When(predicate func(*Cause) bool) Option { return func(h *handler) { h.when = predicate } }

// Retries gives up after this many attempts.
func Retries(n uint32) Option { return func(h *handler) { h.options.Retries = &n } }

// Backoff waits this long before retrying an unexpected error (default 60 s); for daemons,
// before restarting one that failed.
func Backoff(d time.Duration) Option {
	return func(h *handler) {
		seconds := d.Seconds()
		h.options.BackoffSeconds = &seconds
		if h.daemon != nil {
			h.daemon.BackoffSeconds = seconds
		}
	}
}

// Timeout fails the handler permanently once this much time passed since its first attempt.
func Timeout(d time.Duration) Option {
	return func(h *handler) { seconds := d.Seconds(); h.options.TimeoutSeconds = &seconds }
}

// CallTimeout is the controller's deadline for one call of the handler (default 300 s).
func CallTimeout(d time.Duration) Option {
	return func(h *handler) { seconds := d.Seconds(); h.options.CallTimeoutSeconds = &seconds }
}

// Errors says what unexpected errors mean (default ErrorsTemporary).
func Errors(mode ErrorsMode) Option {
	return func(h *handler) {
		h.options.Errors = map[ErrorsMode]pb.ErrorsMode{
			ErrorsTemporary: pb.ErrorsMode_ERRORS_MODE_TEMPORARY,
			ErrorsPermanent: pb.ErrorsMode_ERRORS_MODE_PERMANENT,
			ErrorsIgnored:   pb.ErrorsMode_ERRORS_MODE_IGNORED,
		}[mode]
	}
}

// Optional makes a deletion handler best effort: no finalizer is added for it.
func Optional() Option { return func(h *handler) { h.options.Optional = true } }

// Deleted makes a resuming handler resume objects that are being deleted too.
func Deleted() Option { return func(h *handler) { h.options.Deleted = true } }

// Idle calls a timer only when the object has not changed for this long.
func Idle(d time.Duration) Option {
	return func(h *handler) { h.timerOptions().IdleSeconds = d.Seconds() }
}

// InitialDelay waits this long after the object is first seen before a timer's first call or
// a daemon's start.
func InitialDelay(d time.Duration) Option {
	return func(h *handler) {
		if h.kind == pb.HandlerKind_HANDLER_KIND_DAEMON {
			h.daemon.InitialDelaySeconds = d.Seconds()
			return
		}
		h.timerOptions().InitialDelaySeconds = d.Seconds()
	}
}

// Sharp keeps a timer's schedule strict, however long each call takes.
func Sharp() Option { return func(h *handler) { h.timerOptions().Sharp = true } }

// CancellationTimeout is how long a daemon may take to exit once asked to stop.
func CancellationTimeout(d time.Duration) Option {
	return func(h *handler) {
		if h.daemon == nil {
			h.misplaced = append(h.misplaced, "CancellationTimeout only applies to daemons")
			return
		}
		h.daemon.CancellationTimeoutSeconds = d.Seconds()
	}
}

// Operations reviews only these operations (CREATE, UPDATE, DELETE, CONNECT; default all).
func Operations(operations ...string) Option {
	return func(h *handler) { h.admissionOptions().Operations = operations }
}

// Subresources reviews these subresources (for example `status`) instead of the main resource.
func Subresources(subresources ...string) Option {
	return func(h *handler) { h.admissionOptions().Subresources = subresources }
}

// SideEffects says the admission handler has side effects (the webhook's sideEffects).
func SideEffects() Option { return func(h *handler) { h.admissionOptions().SideEffects = true } }

// FailClosed denies requests when the admission handler fails or cannot be reached.
func FailClosed() Option { return func(h *handler) { h.admissionOptions().FailClosed = true } }

// Subhandlers is the function of the handler's sub-handlers: the controller calls
// `<parent>/<child>` for each sub-handler the parent declared with Cause.Subhandler, and
// this function gets those calls, with SubhandlerID and Param set.
func Subhandlers(fn HandlerFunc) Option { return func(h *handler) { h.children = fn } }

func (h *handler) timerOptions() *pb.TimerOptions {
	if h.kind != pb.HandlerKind_HANDLER_KIND_TIMER {
		h.misplaced = append(h.misplaced, "Idle, InitialDelay and Sharp only apply to timers (InitialDelay to daemons too)")
		return &pb.TimerOptions{}
	}
	return h.timer
}

func (h *handler) admissionOptions() *pb.AdmissionOptions {
	if h.admission == nil {
		h.misplaced = append(h.misplaced, "Operations, Subresources, SideEffects and FailClosed only apply to admission handlers")
		return &pb.AdmissionOptions{}
	}
	return h.admission
}
