package bosun

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// Reason says why a handler is called (HandleRequest.reason), in Kopf's words.
type Reason string

// The reasons of Handle calls; activities, daemons and admission handlers have none.
const (
	ReasonNone   Reason = ""
	ReasonCreate Reason = "create"
	ReasonUpdate Reason = "update"
	ReasonDelete Reason = "delete"
	ReasonResume Reason = "resume"
	ReasonEvent  Reason = "event"
	ReasonTimer  Reason = "timer"
	ReasonIndex  Reason = "index"
)

var reasons = map[pb.Reason]Reason{
	pb.Reason_REASON_CREATE: ReasonCreate,
	pb.Reason_REASON_UPDATE: ReasonUpdate,
	pb.Reason_REASON_DELETE: ReasonDelete,
	pb.Reason_REASON_RESUME: ReasonResume,
	pb.Reason_REASON_EVENT:  ReasonEvent,
	pb.Reason_REASON_TIMER:  ReasonTimer,
	pb.Reason_REASON_INDEX:  ReasonIndex,
}

// Resource is the handled object's resource, as the controller resolved it.
type Resource struct {
	Group, Version, Plural, Kind string
	Namespaced                   bool
}

// Operation is what happened at one path of a diff.
type Operation string

// The operations of diff items (Kopf's "add", "change", "remove").
const (
	OperationAdd    Operation = "add"
	OperationChange Operation = "change"
	OperationRemove Operation = "remove"
)

// Change is one item of a diff between the old and the new essence (Kopf's diff items).
type Change struct {
	Operation Operation
	// Path is the list of keys, for example ["spec", "size"].
	Path []string
	// Old is the old value (nil for additions); New the new one (nil for removals).
	Old, New any
}

// Cause is one handler call: everything Kopf passes as keyword arguments, and the recorders
// of what travels back to the controller besides the result (patch, log lines, events,
// children, sub-handlers, memo). What was recorded travels back even when the handler fails.
// A Cause may be used from several goroutines.
type Cause struct {
	// HandlerID is the id of the called handler (`parent/child` for sub-handlers).
	HandlerID string
	// Reason says why it is called.
	Reason Reason
	// Resource is the object's resource.
	Resource Resource
	// Body is the whole object as the controller last saw it.
	Body map[string]any
	// Old and New: for update handlers the old and new essences, for field handlers the
	// field's old and new values (nil where absent).
	Old, New any
	// Diff lists the changes between Old and New.
	Diff []Change
	// Retry counts the attempts of this handler that failed before this one (0 at first).
	Retry int
	// Started is when the first attempt of this handler for this cause started.
	Started time.Time
	// Runtime is how long since Started.
	Runtime time.Duration
	// Param is, for sub-handlers, the parameter their parent gave them.
	Param any
	// Memo is what this server set with SetMemo for this object last time (within the
	// controller's life); nil when none.
	Memo any
	// EventType is, for event and index handlers, ADDED, MODIFIED or DELETED; empty for the
	// initial listing.
	EventType string
	// ParentID and SubhandlerID are, for sub-handlers, the parent's id and the child's own.
	ParentID, SubhandlerID string
	// Admission is, for admission handlers, the AdmissionReview's whole request.
	Admission map[string]any
	// Headers are, for admission handlers, the webhook request's HTTP headers (lower case).
	Headers map[string]string
	// Settings are, for startup handlers, the operator settings the handler may change (Kopf's
	// `settings` kwarg): unset fields leave the controller's own values. Nil for other handlers.
	Settings *pb.OperatorSettings
	// Logger writes lines that go back to the controller, which prints them prefixed with
	// `[namespace/name]`; attributes are appended as key=value.
	Logger *slog.Logger
	// Patch accumulates the patch applied to the object after the handler.
	Patch *Patch

	out     *outputs
	indices *indices
	// live, for daemons: where records go at once instead of out.
	live func(*pb.DaemonMessage)
}

// NewCause returns a cause for this object with nothing else set: for testing handler
// functions directly. Set the other fields as the test needs.
func NewCause(body map[string]any) *Cause {
	c := &Cause{Body: body, Patch: &Patch{}, out: &outputs{}}
	c.Logger = slog.New(&recordHandler{cause: c})
	return c
}

// causeFromRequest builds the cause of a Handle request; invalid JSON is the call's error.
func causeFromRequest(request *pb.HandleRequest) (*Cause, error) {
	body, err := decodeBody("object", request.GetObject())
	if err != nil {
		return nil, err
	}
	c := NewCause(body)
	c.HandlerID = request.GetHandlerId()
	c.Reason = reasons[request.GetReason()]
	c.Resource = resourceOf(request.GetResource())
	c.Retry = int(request.GetRetry())
	c.EventType = request.GetEventType()
	c.ParentID, c.SubhandlerID = request.GetParentId(), request.GetSubhandlerId()
	if ts := request.GetStarted(); ts != nil {
		c.Started = ts.AsTime()
	}
	if d := request.GetRuntime(); d != nil {
		c.Runtime = d.AsDuration()
	}
	fields := []struct {
		name string
		raw  []byte
		into *any
	}{{"old", request.GetOld(), &c.Old}, {"new", request.GetNew(), &c.New}, {"param", request.GetParam(), &c.Param}, {"memo", request.GetMemo(), &c.Memo}}
	for _, f := range fields {
		if *f.into, _, err = decodeField(f.name, f.raw); err != nil {
			return nil, err
		}
	}
	for _, item := range request.GetDiff() {
		change := Change{Path: item.GetPath(), Operation: OperationChange}
		switch item.GetOperation() {
		case pb.DiffItem_OPERATION_ADD:
			change.Operation = OperationAdd
		case pb.DiffItem_OPERATION_REMOVE:
			change.Operation = OperationRemove
		}
		if change.Old, _, err = decodeField("diff.old", item.GetOld()); err != nil {
			return nil, err
		}
		if change.New, _, err = decodeField("diff.new", item.GetNew()); err != nil {
			return nil, err
		}
		c.Diff = append(c.Diff, change)
	}
	return c, nil
}

// causeFromDaemon builds a daemon's cause; its records go to live at once.
func causeFromDaemon(request *pb.DaemonRequest, live func(*pb.DaemonMessage)) (*Cause, error) {
	body, err := decodeBody("object", request.GetObject())
	if err != nil {
		return nil, err
	}
	c := NewCause(body)
	c.HandlerID = request.GetHandlerId()
	c.Resource = resourceOf(request.GetResource())
	c.Retry = int(request.GetRetry())
	if c.Memo, _, err = decodeField("memo", request.GetMemo()); err != nil {
		return nil, err
	}
	c.live = live
	c.Patch.live = func(merge map[string]any, ops []any) {
		if len(merge) > 0 {
			live(&pb.DaemonMessage{Message: &pb.DaemonMessage_MergePatch{MergePatch: mustJSON(merge)}})
		}
		if len(ops) > 0 {
			live(&pb.DaemonMessage{Message: &pb.DaemonMessage_JsonPatch{JsonPatch: mustJSON(ops)}})
		}
	}
	return c, nil
}

// causeFromAdmission builds an admission handler's cause: the object under review (for
// deletions, the old object) as the body.
func causeFromAdmission(request *pb.AdmitRequest) (*Cause, error) {
	var review map[string]any
	if err := json.Unmarshal(request.GetRequest(), &review); err != nil {
		return nil, fmt.Errorf("field `request` of the request is not a JSON object: %w", err)
	}
	object, _ := review["object"].(map[string]any)
	old, _ := review["oldObject"].(map[string]any)
	if object == nil {
		object = old
	}
	c := NewCause(object)
	c.HandlerID = request.GetHandlerId()
	if old != nil {
		c.Old = old
	}
	c.Admission = review
	c.Headers = request.GetHeaders()
	return c, nil
}

// decodeBody decodes the object of a request: a JSON object, or nothing.
func decodeBody(field string, raw []byte) (map[string]any, error) {
	v, given, err := decodeField(field, raw)
	if err != nil || !given || v == nil {
		return nil, err
	}
	body, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("field `%s` of the request is not a JSON object", field)
	}
	return body, nil
}

func resourceOf(r *pb.Resource) Resource {
	return Resource{Group: r.GetGroup(), Version: r.GetVersion(), Plural: r.GetPlural(), Kind: r.GetKind(), Namespaced: r.GetNamespaced()}
}

// Spec is body.spec (nil when absent; reading a nil map is safe).
func (c *Cause) Spec() map[string]any { return object(c.Body, "spec") }

// Meta is body.metadata.
func (c *Cause) Meta() map[string]any { return object(c.Body, "metadata") }

// Status is body.status.
func (c *Cause) Status() map[string]any { return object(c.Body, "status") }

// Name is metadata.name.
func (c *Cause) Name() string { s, _ := c.Meta()["name"].(string); return s }

// Namespace is metadata.namespace; empty for cluster-scoped objects.
func (c *Cause) Namespace() string { s, _ := c.Meta()["namespace"].(string); return s }

// UID is metadata.uid.
func (c *Cause) UID() string { s, _ := c.Meta()["uid"].(string); return s }

// Labels are the object's labels.
func (c *Cause) Labels() map[string]string { return stringMap(object(c.Meta(), "labels")) }

// Annotations are the object's annotations.
func (c *Cause) Annotations() map[string]string {
	return stringMap(object(c.Meta(), "annotations"))
}

// DecodeBody decodes the object into a type of yours (for example a typed custom resource).
func (c *Cause) DecodeBody(into any) error {
	encoded, err := json.Marshal(c.Body)
	if err != nil {
		return err
	}
	return json.Unmarshal(encoded, into)
}

// DryRun says, for admission handlers, whether the request is a dry run: a handler with side
// effects must not make them then (Kopf's `dryrun`).
func (c *Cause) DryRun() bool { dry, _ := c.Admission["dryRun"].(bool); return dry }

func object(m map[string]any, key string) map[string]any {
	inner, _ := m[key].(map[string]any)
	return inner
}

func stringMap(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
