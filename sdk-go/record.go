package bosun

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// LogRecord is a log line a handler wrote through its Cause's Logger.
type LogRecord struct {
	Level   slog.Level
	Message string
}

// EventRecord is a Kubernetes event the handler posts about its object.
type EventRecord struct {
	// Type is `Normal`, `Warning`, or anything else (Kopf allows any type).
	Type, Reason, Message string
}

// OwnedRecord is an object the handler asks the controller to create as its object's child.
type OwnedRecord struct {
	Object map[string]any
	// Apply: server-side apply instead of a plain create; CopyLabels: the owner's labels too.
	Apply, CopyLabels bool
}

// SubhandlerRecord is a sub-handler the handler declared.
type SubhandlerRecord struct {
	ID    string
	Param any
	// Options are the child's own (Retries, Backoff, Timeout, CallTimeout, Errors); unset ones
	// are the parent's. Nil when none was given.
	Options *pb.HandlerOptions
}

// outputs is what a handler records besides its patch, moved into the answer when it ends.
type outputs struct {
	mu          sync.Mutex
	logs        []LogRecord
	events      []EventRecord
	owned       []OwnedRecord
	subhandlers []SubhandlerRecord
	warnings    []string
	memo        any
	memoSet     bool
}

// Event posts a Kubernetes event about the object (Kopf's kopf.event).
func (c *Cause) Event(eventType, reason, message string) {
	record := EventRecord{Type: eventType, Reason: reason, Message: message}
	if c.live != nil {
		c.live(&pb.DaemonMessage{Message: &pb.DaemonMessage_Event{Event: record.proto()}})
		return
	}
	c.out.mu.Lock()
	c.out.events = append(c.out.events, record)
	c.out.mu.Unlock()
}

// InfoEvent posts a `Normal` event (Kopf's kopf.info).
func (c *Cause) InfoEvent(reason, message string) { c.Event("Normal", reason, message) }

// WarnEvent posts a `Warning` event (Kopf's kopf.warn).
func (c *Cause) WarnEvent(reason, message string) { c.Event("Warning", reason, message) }

// ExceptionEvent posts an `Error` event with the error appended (Kopf's kopf.exception).
func (c *Cause) ExceptionEvent(reason, message string, err error) {
	c.Event("Error", reason, fmt.Sprintf("%s %v", message, err))
}

// Adopt asks the controller to create obj as a child of the handled object (Kopf's
// kopf.adopt plus a create): an owner reference, the owner's namespace and labels, and a name
// derived from the owner's unless obj has one. A plain create of an existing child of the
// same owner counts as done, so a re-run handler does not duplicate it.
func (c *Cause) Adopt(obj map[string]any) { c.Own(OwnedRecord{Object: obj, CopyLabels: true}) }

// AdoptApplied is Adopt with server-side apply: re-running the handler updates the child.
func (c *Cause) AdoptApplied(obj map[string]any) {
	c.Own(OwnedRecord{Object: obj, Apply: true, CopyLabels: true})
}

// Own asks the controller to create an object owned by the handled one, as Adopt does, with
// the options of the record.
func (c *Cause) Own(record OwnedRecord) {
	record.Object, _ = deepCopy(record.Object).(map[string]any)
	c.out.mu.Lock()
	c.out.owned = append(c.out.owned, record)
	c.out.mu.Unlock()
}

// Subhandler declares the sub-handler id of this handler with a parameter (Kopf's
// kopf.subhandler and kopf.execute): the controller tracks, retries and reports it as
// `<parent>/<id>` and calls the function given with the Subhandlers option, whose Cause has
// SubhandlerID and Param set. The parent counts as finished when all its children are.
// Options (Retries, Backoff, Timeout, CallTimeout, Errors) are the child's own; the others
// do not apply to sub-handlers and are ignored.
func (c *Cause) Subhandler(id string, param any, opts ...Option) {
	record := SubhandlerRecord{ID: id, Param: param}
	if len(opts) > 0 {
		scratch := &handler{filters: &pb.Filters{}, options: &pb.HandlerOptions{}}
		for _, opt := range opts {
			opt(scratch)
		}
		record.Options = scratch.options
	}
	c.out.mu.Lock()
	c.out.subhandlers = append(c.out.subhandlers, record)
	c.out.mu.Unlock()
}

// SetMemo replaces the object's memo: it comes back as Memo in later calls for the object
// within the controller's life (it is not persisted).
func (c *Cause) SetMemo(memo any) {
	c.out.mu.Lock()
	c.out.memo, c.out.memoSet = memo, true
	c.out.mu.Unlock()
}

// Warn adds, for admission handlers, a warning the API server passes to the client (Kopf's
// `warnings`); kubectl prints it.
func (c *Cause) Warn(message string) {
	c.out.mu.Lock()
	c.out.warnings = append(c.out.warnings, message)
	c.out.mu.Unlock()
}

// Logs are the log lines recorded so far.
func (c *Cause) Logs() []LogRecord {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	return append([]LogRecord(nil), c.out.logs...)
}

// Events are the events recorded so far.
func (c *Cause) Events() []EventRecord {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	return append([]EventRecord(nil), c.out.events...)
}

// Owned are the children requested so far.
func (c *Cause) Owned() []OwnedRecord {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	return append([]OwnedRecord(nil), c.out.owned...)
}

// Subhandlers are the sub-handlers declared so far.
func (c *Cause) Subhandlers() []SubhandlerRecord {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	return append([]SubhandlerRecord(nil), c.out.subhandlers...)
}

// fill moves what was recorded into a Handle answer.
func (c *Cause) fill(response *pb.HandleResponse) {
	response.MergePatch, response.JsonPatch = c.Patch.take()
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	response.Logs = logLines(c.out.logs)
	for _, e := range c.out.events {
		response.Events = append(response.Events, e.proto())
	}
	for _, o := range c.out.owned {
		response.Owned = append(response.Owned, &pb.OwnedObject{Object: mustJSON(o.Object), Apply: o.Apply, CopyLabels: o.CopyLabels})
	}
	for _, s := range c.out.subhandlers {
		response.Subhandlers = append(response.Subhandlers, &pb.SubHandler{Id: s.ID, Param: mustJSON(s.Param), Options: s.Options})
	}
	if c.out.memoSet {
		response.Memo = mustJSON(c.out.memo)
	}
	c.out.logs, c.out.events, c.out.owned, c.out.subhandlers, c.out.memoSet = nil, nil, nil, nil, false
}

func logLines(records []LogRecord) []*pb.LogLine {
	var lines []*pb.LogLine
	for _, r := range records {
		lines = append(lines, r.proto())
	}
	return lines
}

func (r LogRecord) proto() *pb.LogLine {
	level := pb.LogLine_LEVEL_INFO
	switch {
	case r.Level >= slog.LevelError:
		level = pb.LogLine_LEVEL_ERROR
	case r.Level >= slog.LevelWarn:
		level = pb.LogLine_LEVEL_WARNING
	case r.Level < slog.LevelInfo:
		level = pb.LogLine_LEVEL_DEBUG
	}
	return &pb.LogLine{Level: level, Message: r.Message}
}

func (e EventRecord) proto() *pb.Event {
	return &pb.Event{Type: e.Type, Reason: e.Reason, Message: e.Message}
}

// recordHandler is the slog.Handler behind a Cause's Logger: it records each line (message,
// then the attributes as key=value) for the answer, or streams it for daemons.
type recordHandler struct {
	cause  *Cause
	attrs  []slog.Attr
	groups string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	for _, a := range h.attrs {
		appendAttr(&b, "", a) // already prefixed with their groups
	}
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, h.groups, a)
		return true
	})
	record := LogRecord{Level: r.Level, Message: b.String()}
	c := h.cause
	if c.live != nil {
		c.live(&pb.DaemonMessage{Message: &pb.DaemonMessage_Log{Log: record.proto()}})
		return nil
	}
	c.out.mu.Lock()
	c.out.logs = append(c.out.logs, record)
	c.out.mu.Unlock()
	return nil
}

func appendAttr(b *strings.Builder, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Value.Kind() == slog.KindGroup {
		for _, inner := range a.Value.Group() {
			appendAttr(b, prefix+a.Key+".", inner)
		}
		return
	}
	if a.Equal(slog.Attr{}) {
		return
	}
	fmt.Fprintf(b, " %s%s=%v", prefix, a.Key, a.Value.Any())
}

func (h *recordHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	grouped := make([]slog.Attr, 0, len(h.attrs)+len(attrs))
	grouped = append(grouped, h.attrs...)
	for _, a := range attrs {
		if h.groups != "" {
			a.Key = h.groups + a.Key
		}
		grouped = append(grouped, a)
	}
	return &recordHandler{cause: h.cause, attrs: grouped, groups: h.groups}
}

func (h *recordHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &recordHandler{cause: h.cause, attrs: h.attrs, groups: h.groups + name + "."}
}
