package bosuntest_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	bosun "example.invalid/bosun/sdk-go"
	"example.invalid/bosun/sdk-go/bosuntest"
	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

const kex = "kopf.dev/v1/kopfexamples"

func operator() *bosun.Operator {
	op := bosun.New()
	op.OnCreate(kex, func(_ context.Context, c *bosun.Cause) (any, error) {
		c.Logger.Info("creating", "name", c.Name())
		c.Patch.Label("seen", "yes")
		for _, item := range []string{"a", "b"} {
			c.Subhandler(item, item)
		}
		return map[string]any{"size": c.Spec()["size"]}, nil
	}, bosun.ID("create_fn"), bosun.Subhandlers(func(_ context.Context, c *bosun.Cause) (any, error) {
		return map[string]any{"item": c.Param, "child": c.SubhandlerID}, nil
	}))
	op.OnCreate(kex, func(_ context.Context, c *bosun.Cause) (any, error) {
		if c.Retry < 2 {
			return nil, bosun.TemporaryError{Message: "not yet", Delay: time.Second}
		}
		return nil, errors.New("gave up")
	}, bosun.ID("retrying"))
	op.OnStartup(func(context.Context, *bosun.Cause) (any, error) { return nil, nil }, bosun.ID("startup"))
	op.OnDaemon(kex, func(ctx context.Context, c *bosun.Cause) (any, error) {
		c.Logger.Info("started")
		<-ctx.Done()
		return nil, nil
	}, bosun.ID("daemon"))
	return op
}

func TestHandlersRunInProcessAndAnswerAsTheControllerSeesIt(t *testing.T) {
	h := bosuntest.New(t, operator())
	body := map[string]any{"metadata": map[string]any{"name": "kex", "uid": "u-1"}, "spec": map[string]any{"size": 3}}
	got := h.Handle("create_fn", bosuntest.Call{Body: body})
	if got.Outcome != bosuntest.Success || got.Result["size"] != 3.0 || got.Logs[0] != "creating name=kex" {
		t.Errorf("create_fn: %+v", got)
	}
	if !reflect.DeepEqual(got.Patch, map[string]any{"metadata": map[string]any{"labels": map[string]any{"seen": "yes"}}}) {
		t.Errorf("patch: %v", got.Patch)
	}
	if len(got.Subhandlers) != 2 || got.Subhandlers[1].ID != "b" {
		t.Errorf("subhandlers: %v", got.Subhandlers)
	}
	child := h.Handle("create_fn/b", bosuntest.Call{Body: body, Param: "b"})
	if !reflect.DeepEqual(child.Result, map[string]any{"item": "b", "child": "b"}) {
		t.Errorf("child: %+v", child)
	}
	if r := h.Handle("retrying", bosuntest.Call{Body: body, Retry: 1}); r.Outcome != bosuntest.Temporary || r.Delay != time.Second {
		t.Errorf("retry 1: %+v", r)
	}
	if r := h.Handle("retrying", bosuntest.Call{Body: body, Retry: 2}); r.Outcome != bosuntest.Unexpected || r.Message != "gave up" {
		t.Errorf("retry 2: %+v", r)
	}
	if r := h.Activity("startup", 0); r.Outcome != bosuntest.Success {
		t.Errorf("startup: %+v", r)
	}
}

func TestADaemonRunsInProcessUntilStopped(t *testing.T) {
	h := bosuntest.New(t, operator())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run := h.Daemon("daemon", map[string]any{"metadata": map[string]any{"uid": "u-1"}})
	if _, err := run.WaitFor(ctx, func(m *pb.DaemonMessage) bool { return m.GetLog().GetMessage() == "started" }); err != nil {
		t.Fatal(err)
	}
	if !h.Stop("daemon", "u-1") {
		t.Fatal("the daemon runs")
	}
	messages, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exit := messages[len(messages)-1].GetExit(); exit == nil || !exit.Stopped || exit.Outcome != pb.Outcome_OUTCOME_SUCCESS {
		t.Errorf("exit: %v", messages)
	}
}

func TestADaemonStopsWhenItsCallIsCancelledAndAPanicEndsIt(t *testing.T) {
	op := bosun.New()
	op.OnDaemon(kex, func(ctx context.Context, c *bosun.Cause) (any, error) {
		<-ctx.Done()
		return nil, nil
	}, bosun.ID("waits"))
	op.OnDaemon(kex, func(context.Context, *bosun.Cause) (any, error) { panic("boom") }, bosun.ID("panics"))
	h := bosuntest.New(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := map[string]any{"metadata": map[string]any{"uid": "u-1"}}

	waits := h.Daemon("waits", body)
	waits.Cancel()
	messages, err := waits.Wait(ctx)
	if err != nil || len(messages) == 0 {
		t.Fatalf("%v %v", messages, err)
	}
	if exit := messages[len(messages)-1].GetExit(); !exit.GetStopped() || exit.GetOutcome() != pb.Outcome_OUTCOME_SUCCESS {
		t.Errorf("a cancelled call stops the daemon: %v", exit)
	}

	panics := h.Daemon("panics", body)
	messages, err = panics.Wait(ctx)
	if err != nil || len(messages) != 1 {
		t.Fatalf("%v %v", messages, err)
	}
	if exit := messages[0].GetExit(); exit.GetStopped() || exit.GetOutcome() != pb.Outcome_OUTCOME_UNEXPECTED_ERROR {
		t.Errorf("a panic is an unexpected error: %v", exit)
	}
}
