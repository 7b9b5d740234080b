package bosun

import (
	"context"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

const kex = "kopf.dev/v1/kopfexamples"

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

func create_fn(context.Context, *Cause) (any, error) { return nil, nil }

func noop(context.Context, *Cause) (any, error) { return nil, nil }

func ids(t *testing.T, op *Operator) []string {
	t.Helper()
	reg, err := op.build()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, h := range reg.handlers {
		out = append(out, h.id)
	}
	return out
}

func TestIdsDefaultToFunctionNamesAndNumberedKindsForClosures(t *testing.T) {
	op := New()
	op.OnCreate(kex, create_fn)
	op.OnCreate(kex, func(context.Context, *Cause) (any, error) { return nil, nil })
	op.OnCreate(kex, func(context.Context, *Cause) (any, error) { return nil, nil })
	op.OnUpdate(kex, func(context.Context, *Cause) (any, error) { return nil, nil })
	op.OnField(kex, "spec.field", func(context.Context, *Cause) (any, error) { return nil, nil })
	op.OnField(kex, "spec.other", noop, ID("other_fn"))
	op.OnUpdate(kex, noop, ID("narrow_fn"), Field("spec.size"))
	want := []string{"create_fn", "create_fn_2", "create_fn_3", "update_fn", "field_fn/spec.field", "other_fn/spec.other", "narrow_fn/spec.size"}
	if got := ids(t, op); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestRegistrationMistakesAreReportedWhenBuilding(t *testing.T) {
	table := []struct {
		register func(op *Operator)
		want     string
	}{
		{func(op *Operator) {}, "no handlers are registered"},
		{func(op *Operator) { op.OnCreate("a//b", noop) }, `invalid resource selector "a//b"`},
		{func(op *Operator) { op.OnCreate(kex, create_fn); op.OnCreate(kex, noop, ID("create_fn")) }, `two handlers have the id "create_fn"`},
		{func(op *Operator) { op.OnCreate(kex, noop, Optional()) }, "Optional only applies"},
		{func(op *Operator) { op.OnCreate(kex, noop, Value("x")) }, "Value needs a Field"},
		{func(op *Operator) { op.OnCreate(kex, noop, OldValue("x")) }, "only apply to update and field"},
		{func(op *Operator) { op.OnCreate(kex, noop, Idle(time.Second)) }, "only apply to timers"},
		{func(op *Operator) { op.OnTimer(kex, 0, noop) }, "a timer's interval must be positive"},
		{func(op *Operator) { op.OnCreate(kex, noop, FailClosed()) }, "only apply to admission handlers"},
		{func(op *Operator) { op.OnCreate(kex, noop, CancellationTimeout(time.Second)) }, "only applies to daemons"},
		{func(op *Operator) { op.OnCreate(kex, nil, ID("x")) }, "the function is nil"},
		{func(op *Operator) { op.OnProbe(noop, Subhandlers(noop)) }, "Subhandlers only apply"},
	}
	for _, row := range table {
		op := New()
		row.register(op)
		if err := op.Validate(); err == nil || !strings.Contains(err.Error(), row.want) {
			t.Errorf("%v should contain %q", err, row.want)
		}
	}
}

func TestDescribeListsHandlersWithFiltersAndOptionsInOrder(t *testing.T) {
	op := New()
	op.ServerName("test")
	op.OnStartup(noop, ID("startup"))
	op.OnCreate(kex, create_fn, Retries(3), Backoff(1500*time.Millisecond), Errors(ErrorsPermanent),
		Label("somelabel", "somevalue"), Annotation("skip", Absent), When(func(c *Cause) bool { return c.Name() != "x" }))
	op.OnDelete("kex", noop, ID("delete_fn"), Optional())
	op.OnTimer(kex, 500*time.Millisecond, noop, ID("timer"), Idle(time.Second), Label("t", Present))
	op.OnDaemon(kex, noop, ID("daemon"), CancellationTimeout(2*time.Second), InitialDelay(time.Second))
	op.IgnoredFields(kex, "spec.replicas")
	op.Owns(kex, "v1/pods", "deployments.apps")
	reg, err := op.build()
	if err != nil {
		t.Fatal(err)
	}
	d := reg.describe()
	if d.ServerName != "test" || len(d.Handlers) != 5 {
		t.Fatalf("%v", d)
	}
	startup, create, del, timer, daemon := d.Handlers[0], d.Handlers[1], d.Handlers[2], d.Handlers[3], d.Handlers[4]
	if startup.Kind != pb.HandlerKind_HANDLER_KIND_STARTUP || startup.Resource != nil {
		t.Errorf("startup: %v", startup)
	}
	if create.Id != "create_fn" || create.Resource.Group != "kopf.dev" || create.Resource.Version != "v1" || create.Resource.Name != "kopfexamples" {
		t.Errorf("create: %v", create)
	}
	if o := create.Options; o.GetRetries() != 3 || o.GetBackoffSeconds() != 1.5 || o.Errors != pb.ErrorsMode_ERRORS_MODE_PERMANENT {
		t.Errorf("options: %v", o)
	}
	f := create.Filters
	if !f.HasWhen || string(f.Labels["somelabel"].GetEquals()) != `"somevalue"` || !f.Annotations["skip"].GetAbsent() {
		t.Errorf("filters: %v", f)
	}
	if !del.Options.Optional || del.Filters.HasWhen || del.Resource.Name != "kex" {
		t.Errorf("delete: %v", del)
	}
	if timer.Timer.IntervalSeconds != 0.5 || timer.Timer.IdleSeconds != 1 || !timer.Filters.Labels["t"].GetPresent() {
		t.Errorf("timer: %v", timer)
	}
	if daemon.Daemon.CancellationTimeoutSeconds != 2 || daemon.Daemon.InitialDelaySeconds != 1 {
		t.Errorf("daemon: %v", daemon)
	}
	r := d.Resources
	if len(r) != 1 || !reflect.DeepEqual(r[0].IgnoredFields, []string{"spec.replicas"}) || len(r[0].Owns) != 2 || r[0].Owns[1].Name != "deployments" {
		t.Errorf("resources: %v", r)
	}
}

func TestCallsRouteToTheHandlerOrToTheLongestRegisteredParent(t *testing.T) {
	op := New()
	op.OnCreate(kex, noop, ID("create_fn"))
	op.OnField(kex, "spec.field", noop, ID("create_fn"))
	reg, err := op.build()
	if err != nil {
		t.Fatal(err)
	}
	table := []struct{ id, handler, child string }{
		{"create_fn", "create_fn", ""},
		{"create_fn/spec.field", "create_fn/spec.field", ""},
		{"create_fn/item1", "create_fn", "item1"},
		{"create_fn/spec.field/item1", "create_fn/spec.field", "item1"},
		{"create_fn/a/b", "create_fn", "a/b"},
		{"other", "", ""},
		{"other/item1", "", ""},
	}
	for _, row := range table {
		h, child, ok := reg.route(row.id)
		got := ""
		if ok {
			got = h.id
		}
		if got != row.handler || child != row.child {
			t.Errorf("%s: got %q %q", row.id, got, child)
		}
	}
}

func TestAWhenPredicateSkipsAndItsPanicIsAnUnexpectedError(t *testing.T) {
	op := New()
	op.OnCreate(kex, noop, ID("only_a"), When(func(c *Cause) bool { return c.Name() == "a" }))
	op.OnCreate(kex, noop, ID("panics"), When(func(c *Cause) bool { panic("no") }))
	s, err := op.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	table := []struct {
		id, name string
		outcome  pb.Outcome
	}{
		{"only_a", "a", pb.Outcome_OUTCOME_SUCCESS},
		{"only_a", "b", pb.Outcome_OUTCOME_SKIPPED},
		{"panics", "a", pb.Outcome_OUTCOME_UNEXPECTED_ERROR},
	}
	for _, row := range table {
		object := []byte(`{"metadata":{"name":"` + row.name + `"}}`)
		r, err := s.Handle(context.Background(), &pb.HandleRequest{HandlerId: row.id, Object: object})
		if err != nil || r.Outcome != row.outcome {
			t.Errorf("%s for %s: %v %v", row.id, row.name, r, err)
		}
	}
}
