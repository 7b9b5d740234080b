package bosun

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

func TestIndicesKeepResultsPerObjectAndServeThemToOtherHandlers(t *testing.T) {
	op := New()
	op.Index("v1/pods", func(_ context.Context, c *Cause) (any, error) {
		if c.Name() == "broken" {
			return nil, errors.New("cannot index")
		}
		if c.Name() == "refused" {
			return nil, PermanentError{Message: "never"}
		}
		return map[string]any{c.Labels()["app"]: c.Name()}, nil
	}, ID("by_app"))
	op.OnCreate(kex, func(_ context.Context, c *Cause) (any, error) {
		return c.Index("by_app").Get("web"), nil
	}, ID("create"))
	s, err := op.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod := func(name, uid, app string) []byte {
		return []byte(`{"metadata":{"name":"` + name + `","uid":"` + uid + `","labels":{"app":"` + app + `"}}}`)
	}
	index := func(object []byte, eventType string) *pb.HandleResponse {
		t.Helper()
		r, err := s.Handle(ctx, &pb.HandleRequest{HandlerId: "by_app", Reason: pb.Reason_REASON_INDEX, Object: object, EventType: eventType})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	read := func() any {
		t.Helper()
		r, err := s.Handle(ctx, &pb.HandleRequest{HandlerId: "create", Reason: pb.Reason_REASON_CREATE, Object: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return string(r.Result)
	}

	_, err = s.Handle(ctx, &pb.HandleRequest{HandlerId: "create", Object: []byte(`{}`)})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("before it is described, a server with indices is unavailable: %v", err)
	}
	index(pod("a", "u-a", "web"), "")
	index(pod("b", "u-b", "web"), "ADDED")
	index(pod("c", "u-c", "db"), "ADDED")
	if _, err := s.Describe(ctx, &pb.DescribeRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != `["a","b"]` {
		t.Errorf("indexed: %v", got)
	}
	index(pod("b", "u-b", "db"), "MODIFIED")
	index(pod("a", "u-a", "web"), "DELETED")
	if got := read(); got != `[]` {
		t.Errorf("after a change and a deletion: %v", got)
	}
	if got := s.indices.get("by_app").Keys(); !reflect.DeepEqual(got, []string{"db"}) {
		t.Errorf("keys: %v", got)
	}
	index(pod("broken", "u-c", "web"), "MODIFIED") // ignored by default: c keeps its values
	if got := s.indices.get("by_app").Get("db"); len(got) != 2 {
		t.Errorf("an ignored error keeps the stale values: %v", got)
	}
	if r := index(pod("refused", "u-c", "web"), "MODIFIED"); r.Outcome != pb.Outcome_OUTCOME_PERMANENT_ERROR {
		t.Errorf("refused: %v", r)
	}
	if r := index(pod("c", "u-c", "db"), "MODIFIED"); r.Outcome != pb.Outcome_OUTCOME_SKIPPED {
		t.Errorf("a permanently failed object stays out: %v", r)
	}
	if !s.indices.get("by_app").excluded("u-c", time.Now()) {
		t.Error("excluded")
	}
	index(pod("c", "u-c", "db"), "DELETED")
	if s.indices.get("by_app").excluded("u-c", time.Now()) {
		t.Error("a deletion forgets the exclusion")
	}
}
