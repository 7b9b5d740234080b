package bosun

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

func TestSelectorsParseInEveryDocumentedForm(t *testing.T) {
	table := []struct{ in, group, version, name string }{
		{"kopf.dev/v1/kopfexamples", "kopf.dev", "v1", "kopfexamples"},
		{"v1/pods", "", "v1", "pods"},
		{"v1beta1/things", "", "v1beta1", "things"},
		{"kopf.dev/kopfexamples", "kopf.dev", "", "kopfexamples"},
		{"kopfexamples.kopf.dev", "kopf.dev", "", "kopfexamples"},
		{"deployments.v1.apps", "apps", "v1", "deployments"},
		{"kex", "", "", "kex"},
	}
	for _, row := range table {
		got, err := ParseSelector(row.in)
		if want := (Selector{row.group, row.version, row.name}); err != nil || got != want {
			t.Errorf("%q: got %+v, %v; want %+v", row.in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a//b", "a/b/c/d", "x..y", "a b"} {
		if _, err := ParseSelector(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestListenAddressesParseInEveryDocumentedForm(t *testing.T) {
	table := map[string][2]string{
		"127.0.0.1:50051":        {"tcp", "127.0.0.1:50051"},
		"http://127.0.0.1:50051": {"tcp", "127.0.0.1:50051"},
		"[::1]:50051":            {"tcp", "[::1]:50051"},
		"unix:///tmp/bosun.sock": {"unix", "/tmp/bosun.sock"},
		"unix:relative.sock":     {"unix", "relative.sock"},
	}
	for in, want := range table {
		network, addr, err := ParseListen(in)
		if err != nil || [2]string{network, addr} != want {
			t.Errorf("%q: got %s %s %v; want %v", in, network, addr, err, want)
		}
	}
	for _, bad := range []string{"", "50051", ":50051", "host:", "host:port", "host:99999", "unix://", "http://h:1/x"} {
		if _, _, err := ParseListen(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestMergingPatchesEqualsApplyingThemInTurn(t *testing.T) {
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	table := []struct{ first, second, want map[string]any }{
		{m(), m("a", 1), m("a", 1)},
		{m("a", m("b", 1)), m("a", m("c", 2)), m("a", m("b", 1, "c", 2))},
		{m("a", m("b", 1)), m("a", m("b", nil)), m("a", m("b", nil))},
		{m("a", 1), m("a", m("b", 2)), m("a", m("b", 2))},
		{m("a", m("b", 1)), m("a", 3), m("a", 3)},
		{m("a", []any{1, 2}), m("a", []any{3}), m("a", []any{3})},
	}
	for _, row := range table {
		var p Patch
		p.Merge(row.first).Merge(row.second)
		if got := p.MergePatch(); !reflect.DeepEqual(got, row.want) {
			t.Errorf("%v + %v = %v; want %v", row.first, row.second, got, row.want)
		}
	}
}

func TestPatchShortcutsSetTheDocumentedPaths(t *testing.T) {
	var p Patch
	p.Status("create_fn", "hello").Spec("size", 3).Label("app.kubernetes.io/name", "demo").RemoveLabel("old").
		Annotation("note", "x").RemoveAnnotation("gone").Set(true, "status", "nested", "deep")
	merge, ops := p.take()
	want := `{"metadata":{"annotations":{"gone":null,"note":"x"},"labels":{"app.kubernetes.io/name":"demo","old":null}},"spec":{"size":3},"status":{"create_fn":"hello","nested":{"deep":true}}}`
	if string(merge) != want || ops != nil {
		t.Errorf("got %s %s", merge, ops)
	}
	if !p.IsEmpty() {
		t.Error("take empties the patch")
	}
}

func TestAPatchDoesNotShareTheMapsItWasGiven(t *testing.T) {
	fragment := map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "1"}}}
	var p Patch
	p.Merge(fragment).Label("b", "2")
	if labels := fragment["metadata"].(map[string]any)["labels"].(map[string]any); len(labels) != 1 {
		t.Errorf("the handler's map changed: %v", fragment)
	}
}

type wrapped struct{ inner error }

func (w wrapped) Error() string { return "wrapped: " + w.inner.Error() }
func (w wrapped) Unwrap() error { return w.inner }

func TestErrorsMapToOutcomes(t *testing.T) {
	delay := 0.5
	table := []struct {
		name    string
		result  any
		err     error
		panic   any
		outcome pb.Outcome
		message string
		delay   *float64
		json    string
	}{
		{"a result", map[string]any{"a": 1}, nil, nil, pb.Outcome_OUTCOME_SUCCESS, "", nil, `{"a":1}`},
		{"nil", nil, nil, nil, pb.Outcome_OUTCOME_SUCCESS, "", nil, ""},
		{"a nil map", map[string]any(nil), nil, nil, pb.Outcome_OUTCOME_SUCCESS, "", nil, ""},
		{"temporary", nil, TemporaryError{Message: "later", Delay: 500 * time.Millisecond}, nil, pb.Outcome_OUTCOME_TEMPORARY_ERROR, "later", &delay, ""},
		{"temporary pointer", nil, &TemporaryError{Message: "later"}, nil, pb.Outcome_OUTCOME_TEMPORARY_ERROR, "later", nil, ""},
		{"wrapped temporary", nil, fmt.Errorf("x: %w", TemporaryError{Message: "later"}), nil, pb.Outcome_OUTCOME_TEMPORARY_ERROR, "later", nil, ""},
		{"permanent", nil, PermanentError{Message: "never"}, nil, pb.Outcome_OUTCOME_PERMANENT_ERROR, "never", nil, ""},
		{"wrapped permanent", nil, wrapped{&PermanentError{Message: "never"}}, nil, pb.Outcome_OUTCOME_PERMANENT_ERROR, "never", nil, ""},
		{"any other error", nil, errors.New("disk full"), nil, pb.Outcome_OUTCOME_UNEXPECTED_ERROR, "disk full", nil, ""},
		{"a panic", nil, nil, "boom", pb.Outcome_OUTCOME_UNEXPECTED_ERROR, "the handler panicked: boom", nil, ""},
		{"an unencodable result", math.Inf(1), nil, nil, pb.Outcome_OUTCOME_UNEXPECTED_ERROR, "the handler's result cannot be encoded as JSON: json: unsupported value: +Inf", nil, ""},
	}
	for _, row := range table {
		r := outcomeOf(row.result, row.err, row.panic)
		if r.outcome != row.outcome || r.message != row.message || string(r.result) != row.json || !reflect.DeepEqual(r.delay, row.delay) {
			t.Errorf("%s: got %+v", row.name, r)
		}
	}
}

func TestAPanickingFunctionIsAnUnexpectedErrorWithItsStack(t *testing.T) {
	r := call(func() (any, error) { panic("boom") })
	if r.outcome != pb.Outcome_OUTCOME_UNEXPECTED_ERROR || !regexpMatch(`^the handler panicked: boom\n(?s:.*)goroutine`, r.message) {
		t.Errorf("got %+v", r)
	}
}

func TestARequestBecomesACauseWithEveryField(t *testing.T) {
	request := &pb.HandleRequest{
		HandlerId: "field_fn/spec.field",
		Reason:    pb.Reason_REASON_UPDATE,
		Object:    []byte(`{"metadata":{"name":"kex","namespace":"default","uid":"u-1","labels":{"a":"b","n":1}},"spec":{"field":"value"}}`),
		Old:       []byte(`"value"`),
		New:       []byte(`"newvalue"`),
		Diff: []*pb.DiffItem{{Operation: pb.DiffItem_OPERATION_CHANGE, Path: []string{"spec", "field"},
			Old: []byte(`"value"`), New: []byte(`"newvalue"`)}},
		Retry:   2,
		Started: timestamppb.New(time.Unix(1_700_000_000, 0)),
		Runtime: durationpb.New(3500 * time.Millisecond),
		Param:   []byte(`{"item":"item1"}`),
	}
	c, err := causeFromRequest(request)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"id", c.HandlerID, "field_fn/spec.field"},
		{"reason", c.Reason, ReasonUpdate},
		{"name", c.Name(), "kex"},
		{"namespace", c.Namespace(), "default"},
		{"uid", c.UID(), "u-1"},
		{"labels", c.Labels(), map[string]string{"a": "b"}},
		{"spec", c.Spec()["field"], "value"},
		{"status", c.Status()["anything"], nil},
		{"old", c.Old, "value"},
		{"new", c.New, "newvalue"},
		{"diff", c.Diff, []Change{{OperationChange, []string{"spec", "field"}, "value", "newvalue"}}},
		{"retry", c.Retry, 2},
		{"started", c.Started.Unix(), int64(1_700_000_000)},
		{"runtime", c.Runtime, 3500 * time.Millisecond},
		{"param", c.Param, map[string]any{"item": "item1"}},
		{"memo", c.Memo, nil},
	}
	for _, check := range checks {
		if !reflect.DeepEqual(check.got, check.want) {
			t.Errorf("%s: got %#v, want %#v", check.name, check.got, check.want)
		}
	}
}

func TestInvalidJSONInARequestNamesTheField(t *testing.T) {
	for field, request := range map[string]*pb.HandleRequest{
		"object": {Object: []byte("{not json")},
		"old":    {Old: []byte("{")},
	} {
		_, err := causeFromRequest(request)
		if err == nil || !regexpMatch("^field `"+field+"` of the request is not valid JSON", err.Error()) {
			t.Errorf("%s: %v", field, err)
		}
	}
	if _, err := causeFromRequest(&pb.HandleRequest{Object: []byte(`[1]`)}); err == nil {
		t.Error("an object that is not a JSON object is the call's error")
	}
}

func TestWhatAHandlerRecordsGoesIntoTheAnswer(t *testing.T) {
	c := NewCause(map[string]any{"metadata": map[string]any{"name": "kex"}})
	c.Logger.Info("hello", "size", 3)
	c.Logger.WithGroup("g").With("a", 1).Warn("careful", "b", 2)
	c.InfoEvent("Reason", "message")
	c.Adopt(map[string]any{"kind": "ConfigMap"})
	c.Subhandler("a", "a")
	c.Subhandler("b", 2, Retries(1), Backoff(time.Second))
	c.SetMemo(map[string]any{"seen": true})
	c.Patch.Status("x", 1)
	response := &pb.HandleResponse{}
	c.fill(response)
	logs := []string{response.Logs[0].Message, response.Logs[1].Message}
	if !reflect.DeepEqual(logs, []string{"hello size=3", "careful g.a=1 g.b=2"}) || response.Logs[1].Level != pb.LogLine_LEVEL_WARNING {
		t.Errorf("logs: %v", response.Logs)
	}
	if e := response.Events[0]; e.Type != "Normal" || e.Reason != "Reason" || e.Message != "message" || e.Regarding != nil {
		t.Errorf("events: %v", response.Events)
	}
	if o := response.Owned[0]; string(o.Object) != `{"kind":"ConfigMap"}` || !o.CopyLabels || o.Apply {
		t.Errorf("owned: %v", response.Owned)
	}
	if s := response.Subhandlers[0]; s.Id != "a" || string(s.Param) != `"a"` || s.Options != nil {
		t.Errorf("subhandlers: %v", response.Subhandlers)
	}
	if o := response.Subhandlers[1].Options; o.GetRetries() != 1 || o.GetBackoffSeconds() != 1 || o.TimeoutSeconds != nil {
		t.Errorf("a child's own options: %v", o)
	}
	if string(response.Memo) != `{"seen":true}` || string(response.MergePatch) != `{"status":{"x":1}}` {
		t.Errorf("memo %s, patch %s", response.Memo, response.MergePatch)
	}
}
