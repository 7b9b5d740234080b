package bosun

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// serve runs the operator on a loopback port for the test's duration; returns a client.
func serve(t *testing.T, op *Operator) (pb.HandlerServerClient, *grpc.ClientConn) {
	t.Helper()
	server, err := op.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- server.ServeListener(ctx, listener) }()
	conn, err := grpc.NewClient(listener.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serving ended with %v", err)
		}
	})
	return pb.NewHandlerServerClient(conn), conn
}

func callContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAServerAnswersHealthDescribeAndHandleOverGRPC(t *testing.T) {
	op := New()
	op.ServerName("grpc-test")
	op.OnCreate(kex, func(_ context.Context, c *Cause) (any, error) {
		c.Logger.Info("creating " + c.Name())
		c.Patch.Label("seen", "yes")
		return map[string]any{"field": c.Spec()["field"]}, nil
	}, ID("create"))
	op.OnCreate(kex, func(_ context.Context, c *Cause) (any, error) { return nil, errors.New("disk full") }, ID("fails"))
	op.OnCreate(kex, func(_ context.Context, c *Cause) (any, error) { panic("boom") }, ID("panics"))
	op.OnCreate(kex, noop, ID("only_a"), When(func(c *Cause) bool { return c.Name() == "a" }))
	op.OnProbe(func(context.Context, *Cause) (any, error) { return map[string]any{"alive": true}, nil }, ID("probe"))
	op.OnStartup(func(_ context.Context, c *Cause) (any, error) {
		c.Settings.PostingEnabled = proto.Bool(false)
		return nil, nil
	}, ID("startup"))
	op.Settings(&pb.OperatorSettings{MaxWorkers: proto.Uint32(3)})
	client, conn := serve(t, op)
	ctx := callContext(t)

	health, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: ""})
	if err != nil || health.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", health, err)
	}
	described, err := client.Describe(ctx, &pb.DescribeRequest{ControllerVersion: "test"})
	if err != nil || described.ServerName != "grpc-test" || len(described.Handlers) != 6 || described.Handlers[0].Id != "create" ||
		described.Settings.GetMaxWorkers() != 3 {
		t.Fatalf("describe: %v %v", described, err)
	}
	object := []byte(`{"metadata":{"name":"kex","namespace":"default"},"spec":{"field":"value"}}`)
	handle := func(id string) *pb.HandleResponse {
		t.Helper()
		response, err := client.Handle(ctx, &pb.HandleRequest{HandlerId: id, Reason: pb.Reason_REASON_CREATE, Object: object})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return response
	}
	created := handle("create")
	if created.Outcome != pb.Outcome_OUTCOME_SUCCESS || string(created.Result) != `{"field":"value"}` ||
		string(created.MergePatch) != `{"metadata":{"labels":{"seen":"yes"}}}` || created.Logs[0].Message != "creating kex" {
		t.Errorf("create: %v", created)
	}
	if failed := handle("fails"); failed.Outcome != pb.Outcome_OUTCOME_UNEXPECTED_ERROR || failed.Message != "disk full" {
		t.Errorf("fails: %v", failed)
	}
	if panicked := handle("panics"); panicked.Outcome != pb.Outcome_OUTCOME_UNEXPECTED_ERROR || !strings.HasPrefix(panicked.Message, "the handler panicked: boom") {
		t.Errorf("panics: %v", panicked)
	}
	if skipped := handle("only_a"); skipped.Outcome != pb.Outcome_OUTCOME_SKIPPED {
		t.Errorf("only_a: %v", skipped)
	}
	probed, err := client.Activity(ctx, &pb.ActivityRequest{HandlerId: "probe", Kind: pb.HandlerKind_HANDLER_KIND_PROBE})
	if err != nil || string(probed.Result) != `{"alive":true}` || probed.Settings != nil {
		t.Errorf("probe: %v %v", probed, err)
	}
	started, err := client.Activity(ctx, &pb.ActivityRequest{HandlerId: "startup", Kind: pb.HandlerKind_HANDLER_KIND_STARTUP})
	if err != nil || started.Settings == nil || started.Settings.PostingEnabled == nil || *started.Settings.PostingEnabled {
		t.Errorf("startup: %v %v", started, err)
	}

	_, err = client.Handle(ctx, &pb.HandleRequest{HandlerId: "no-such-handler", Object: object})
	want := `handler server "grpc-test" has no handler "no-such-handler"; it has: create, fails, panics, only_a`
	if status.Code(err) != codes.NotFound || status.Convert(err).Message() != want {
		t.Errorf("unknown id: %v", err)
	}
	_, err = client.Handle(ctx, &pb.HandleRequest{HandlerId: "create", Object: []byte("{")})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("invalid JSON: %v", err)
	}
}

func TestADaemonStreamsItsRecordsAndExitsWhenStopped(t *testing.T) {
	op := New()
	op.OnDaemon(kex, func(ctx context.Context, c *Cause) (any, error) {
		c.Logger.Info("started")
		c.Patch.Status("running", true)
		<-ctx.Done()
		c.Logger.Info("stopping")
		return nil, nil
	}, ID("daemon"))
	client, _ := serve(t, op)
	ctx := callContext(t)
	stream, err := client.Daemon(ctx, &pb.DaemonRequest{HandlerId: "daemon", Object: []byte(`{"metadata":{"uid":"u-1"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	receive := func() *pb.DaemonMessage {
		t.Helper()
		m, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := receive(); m.GetLog().GetMessage() != "started" {
		t.Errorf("first: %v", m)
	}
	if m := receive(); string(m.GetMergePatch()) != `{"status":{"running":true}}` {
		t.Errorf("second: %v", m)
	}
	stopping, err := client.StopDaemon(ctx, &pb.StopDaemonRequest{HandlerId: "daemon", Uid: "u-1"})
	if err != nil || !stopping.Stopping {
		t.Fatalf("stop: %v %v", stopping, err)
	}
	if m := receive(); m.GetLog().GetMessage() != "stopping" {
		t.Errorf("third: %v", m)
	}
	exit := receive().GetExit()
	if exit == nil || exit.Outcome != pb.Outcome_OUTCOME_SUCCESS || !exit.Stopped {
		t.Errorf("exit: %v", exit)
	}
	again, err := client.StopDaemon(ctx, &pb.StopDaemonRequest{HandlerId: "daemon", Uid: "u-1"})
	if err != nil || again.Stopping {
		t.Errorf("a daemon that ended is not stopping: %v %v", again, err)
	}
}

func TestAdmissionHandlersAllowDenyAndPatch(t *testing.T) {
	op := New()
	op.OnValidate(kex, func(_ context.Context, c *Cause) (any, error) {
		if c.Spec()["field"] == "wrong" {
			return nil, PermanentError{Message: "field is wrong", Code: 422}
		}
		c.Warn("looked at it")
		return nil, nil
	}, ID("validate"))
	op.OnMutate(kex, func(_ context.Context, c *Cause) (any, error) {
		c.Patch.Spec("mutated", true)
		return nil, nil
	}, ID("mutate"))
	client, _ := serve(t, op)
	ctx := callContext(t)
	review := func(field string) []byte {
		return []byte(`{"operation":"CREATE","object":{"spec":{"field":"` + field + `"}}}`)
	}
	denied, err := client.Admit(ctx, &pb.AdmitRequest{HandlerId: "validate", Request: review("wrong")})
	if err != nil || denied.Allowed || denied.Message != "field is wrong" || denied.Code != 422 {
		t.Errorf("denied: %v %v", denied, err)
	}
	allowed, err := client.Admit(ctx, &pb.AdmitRequest{HandlerId: "validate", Request: review("right")})
	if err != nil || !allowed.Allowed || len(allowed.Warnings) != 1 || allowed.MergePatch != nil {
		t.Errorf("allowed: %v %v", allowed, err)
	}
	mutated, err := client.Admit(ctx, &pb.AdmitRequest{HandlerId: "mutate", Request: review("x")})
	if err != nil || !mutated.Allowed || string(mutated.MergePatch) != `{"spec":{"mutated":true}}` {
		t.Errorf("mutated: %v %v", mutated, err)
	}
}

func TestServeListensWhereBosunListenSaysAndStopsWhenCancelled(t *testing.T) {
	socket := t.TempDir() + "/bosun.sock"
	t.Setenv(ListenEnv, "unix://"+socket)
	op := New()
	op.OnCreate(kex, noop, ID("create"))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- op.Serve(ctx) }()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// WaitForReady: the call waits (within its deadline) until the server listens.
	health, err := healthpb.NewHealthClient(conn).Check(callContext(t), &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil || health.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", health, err)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("a cancelled Serve returns nil, not %v", err)
		}
	case <-callContext(t).Done():
		t.Fatal("Serve did not return after its context was cancelled")
	}
}

func TestServeReportsRegistrationMistakesAndBadAddresses(t *testing.T) {
	t.Setenv(ListenEnv, "nowhere")
	op := New()
	op.OnCreate(kex, noop)
	if err := op.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), `invalid listen address "nowhere"`) {
		t.Errorf("a bad address: %v", err)
	}
	t.Setenv(ListenEnv, "127.0.0.1:0")
	if err := New().Serve(context.Background()); err == nil || !strings.Contains(err.Error(), "no handlers are registered") {
		t.Errorf("no handlers: %v", err)
	}
}
