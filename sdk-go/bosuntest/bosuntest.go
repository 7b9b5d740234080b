// Package bosuntest runs a Go handler server's handlers in-process, without a controller or a
// cluster, for unit tests: each call goes through the same server code the controller's
// calls go through (routing, filters' When, errors and panics as outcomes, recorded patches,
// logs, events, children and sub-handlers), and comes back as plain Go values.
//
//	h := bosuntest.New(t, op)
//	got := h.Handle("create_fn", bosuntest.Call{Body: obj})
//	if got.Outcome != bosuntest.Success || got.Result["message"] != "hello world" { … }
//
// Runner (runner.go) runs the real controller instead: `bosun dev` against a dev cluster.
package bosuntest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	bosun "example.invalid/bosun/sdk-go"
	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// Outcome is how a call ended.
type Outcome string

// The outcomes of the contract.
const (
	Success    Outcome = "success"
	Temporary  Outcome = "temporary error"
	Permanent  Outcome = "permanent error"
	Skipped    Outcome = "skipped"
	Unexpected Outcome = "unexpected error"
)

var outcomes = map[pb.Outcome]Outcome{
	pb.Outcome_OUTCOME_SUCCESS:          Success,
	pb.Outcome_OUTCOME_TEMPORARY_ERROR:  Temporary,
	pb.Outcome_OUTCOME_PERMANENT_ERROR:  Permanent,
	pb.Outcome_OUTCOME_SKIPPED:          Skipped,
	pb.Outcome_OUTCOME_UNEXPECTED_ERROR: Unexpected,
}

var reasons = map[bosun.Reason]pb.Reason{
	bosun.ReasonCreate: pb.Reason_REASON_CREATE,
	bosun.ReasonUpdate: pb.Reason_REASON_UPDATE,
	bosun.ReasonDelete: pb.Reason_REASON_DELETE,
	bosun.ReasonResume: pb.Reason_REASON_RESUME,
	bosun.ReasonEvent:  pb.Reason_REASON_EVENT,
	bosun.ReasonTimer:  pb.Reason_REASON_TIMER,
	bosun.ReasonIndex:  pb.Reason_REASON_INDEX,
}

// Harness calls one operator's handlers in-process.
type Harness struct {
	t      testing.TB
	server *bosun.Server
}

// New validates the operator's registrations (a mistake fails the test) and returns a
// harness; the server counts as described, as after the controller's first call.
func New(t testing.TB, op *bosun.Operator) *Harness {
	t.Helper()
	server, err := op.NewServer()
	if err != nil {
		t.Fatalf("the operator cannot be served: %v", err)
	}
	if _, err := server.Describe(context.Background(), &pb.DescribeRequest{}); err != nil {
		t.Fatal(err)
	}
	return &Harness{t: t, server: server}
}

// Describe is the server's Describe answer.
func (h *Harness) Describe() *pb.DescribeResponse {
	d, _ := h.server.Describe(context.Background(), &pb.DescribeRequest{})
	return d
}

// Call is what the controller tells a handler; unset fields are left out of the request.
type Call struct {
	Reason    bosun.Reason // default: create
	Body      map[string]any
	Old, New  any
	Retry     int
	Started   time.Time
	Param     any
	Memo      any
	EventType string
}

// Result is a call's answer as Go values.
type Result struct {
	Outcome     Outcome
	Message     string
	Delay       time.Duration // zero: none given
	Result      map[string]any
	RawResult   any // the result when it is not a JSON object
	Patch       map[string]any
	JSONPatch   []any
	Logs        []string
	Events      []bosun.EventRecord
	Owned       []bosun.OwnedRecord
	Subhandlers []bosun.SubhandlerRecord
	Memo        any
}

// Handle runs one attempt of handler id (`parent/child` for a sub-handler) for Call. A call
// the server refuses (no such handler, invalid JSON) fails the test.
func (h *Harness) Handle(id string, call Call) Result {
	h.t.Helper()
	request := &pb.HandleRequest{
		HandlerId: id, Reason: reasons[call.Reason], Object: encode(h.t, call.Body), Old: encode(h.t, call.Old),
		New: encode(h.t, call.New), Retry: uint32(call.Retry), Param: encode(h.t, call.Param), Memo: encode(h.t, call.Memo),
		EventType: call.EventType,
	}
	if call.Reason == bosun.ReasonNone {
		request.Reason = pb.Reason_REASON_CREATE
	}
	if !call.Started.IsZero() {
		request.Started = timestamppb.New(call.Started)
		request.Runtime = durationpb.New(time.Since(call.Started))
	}
	response, err := h.server.Handle(context.Background(), request)
	if err != nil {
		h.t.Fatalf("Handle %q: %v", id, err)
	}
	r := Result{Outcome: outcomes[response.Outcome], Message: response.Message, Delay: delay(response.DelaySeconds)}
	r.RawResult = decode(h.t, response.Result)
	r.Result, _ = r.RawResult.(map[string]any)
	r.Patch, _ = decode(h.t, response.MergePatch).(map[string]any)
	r.JSONPatch, _ = decode(h.t, response.JsonPatch).([]any)
	r.Memo = decode(h.t, response.Memo)
	r.Logs = lines(response.Logs)
	for _, e := range response.Events {
		r.Events = append(r.Events, bosun.EventRecord{Type: e.Type, Reason: e.Reason, Message: e.Message})
	}
	for _, o := range response.Owned {
		object, _ := decode(h.t, o.Object).(map[string]any)
		r.Owned = append(r.Owned, bosun.OwnedRecord{Object: object, Apply: o.Apply, CopyLabels: o.CopyLabels})
	}
	for _, s := range response.Subhandlers {
		r.Subhandlers = append(r.Subhandlers, bosun.SubhandlerRecord{ID: s.Id, Param: decode(h.t, s.Param)})
	}
	return r
}

// Activity runs one attempt of a startup, cleanup or probe handler.
func (h *Harness) Activity(id string, retry int) Result {
	h.t.Helper()
	response, err := h.server.Activity(context.Background(), &pb.ActivityRequest{HandlerId: id, Retry: uint32(retry)})
	if err != nil {
		h.t.Fatalf("Activity %q: %v", id, err)
	}
	r := Result{Outcome: outcomes[response.Outcome], Message: response.Message, Delay: delay(response.DelaySeconds), Logs: lines(response.Logs)}
	r.RawResult = decode(h.t, response.Result)
	r.Result, _ = r.RawResult.(map[string]any)
	return r
}

// Verdict is an admission handler's answer.
type Verdict struct {
	Allowed  bool
	Message  string
	Code     int32
	Patch    map[string]any
	Warnings []string
}

// Admit reviews an AdmissionReview's request (`operation`, `object`, `oldObject`…).
func (h *Harness) Admit(id string, request map[string]any) Verdict {
	h.t.Helper()
	response, err := h.server.Admit(context.Background(), &pb.AdmitRequest{HandlerId: id, Request: encode(h.t, request)})
	if err != nil {
		h.t.Fatalf("Admit %q: %v", id, err)
	}
	v := Verdict{Allowed: response.Allowed, Message: response.Message, Code: response.Code, Warnings: response.Warnings}
	v.Patch, _ = decode(h.t, response.MergePatch).(map[string]any)
	return v
}

func delay(seconds *float64) time.Duration {
	if seconds == nil {
		return 0
	}
	return time.Duration(*seconds * float64(time.Second))
}

func lines(logs []*pb.LogLine) []string {
	var out []string
	for _, l := range logs {
		out = append(out, l.Message)
	}
	return out
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	if v == nil {
		return nil
	}
	encoded, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("cannot encode %v: %v", v, err)
	}
	return encoded
}

func decode(t testing.TB, raw []byte) any {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("the server answered invalid JSON %q: %v", raw, err)
	}
	return v
}
