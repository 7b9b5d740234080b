package bosun

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// Daemon runs a daemon for one object for as long as the stream is open: what it logs, posts
// or patches is streamed at once; its exit (DaemonExit) is sent only once its function has
// returned, so the controller, which holds the object until then, sees its real end. Its ctx
// is cancelled by StopDaemon and by the call's cancellation.
func (s *Server) Daemon(request *pb.DaemonRequest, stream pb.HandlerServer_DaemonServer) error {
	h, child, ok := s.reg.route(request.GetHandlerId())
	if !ok || child != "" || h.kind != pb.HandlerKind_HANDLER_KIND_DAEMON {
		return status.Errorf(codes.NotFound, "handler server %q has no daemon %q; it has: %s", s.reg.serverName, request.GetHandlerId(), s.reg.ids("Daemon"))
	}
	messages := make(chan *pb.DaemonMessage, 64)
	var closed sync.Mutex // guards sends against the close at exit
	done := false
	send := func(m *pb.DaemonMessage) {
		closed.Lock()
		defer closed.Unlock()
		if !done {
			messages <- m
		}
	}
	cause, err := causeFromDaemon(request, send)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	cause.indices = s.indices
	ctx, stop := context.WithCancel(stream.Context())
	defer stop()
	n := s.running.add(h.id, cause.UID(), stop)
	exit := make(chan *pb.DaemonExit, 1)
	go func() {
		r := call(func() (any, error) { return h.fn(ctx, cause) })
		stopped := ctx.Err() != nil
		closed.Lock()
		done = true
		close(messages)
		closed.Unlock()
		exit <- &pb.DaemonExit{Outcome: r.outcome, Message: r.message, DelaySeconds: r.delay, Stopped: stopped}
	}()
	// The stream's messages, in order, until the function returned; a failed send (the
	// controller went away) stops the daemon, and its messages are drained until it returns.
	for m := range messages {
		if err := stream.Send(m); err != nil {
			stop()
		}
	}
	final := <-exit
	// Forgotten only once its exit is known: a stop asked meanwhile finds it.
	defer s.running.remove(h.id, cause.UID(), n)
	return stream.Send(&pb.DaemonMessage{Message: &pb.DaemonMessage_Exit{Exit: final}})
}

// StopDaemon asks a running daemon to stop: its ctx is cancelled and its stream ends with its
// exit. `stopping: false` when no such daemon runs.
func (s *Server) StopDaemon(_ context.Context, request *pb.StopDaemonRequest) (*pb.StopDaemonResponse, error) {
	return &pb.StopDaemonResponse{Stopping: s.running.stop(request.GetHandlerId(), request.GetUid())}, nil
}

// running are the daemons running now, by handler id and object uid, each with a start
// number (an instance that ends late must not forget a newer one).
type running struct {
	mu      sync.Mutex
	starts  uint64
	daemons map[[2]string]runningDaemon
}

type runningDaemon struct {
	n    uint64
	stop context.CancelFunc
}

func newRunning() *running { return &running{daemons: map[[2]string]runningDaemon{}} }

func (r *running) add(id, uid string, stop context.CancelFunc) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	r.daemons[[2]string{id, uid}] = runningDaemon{n: r.starts, stop: stop}
	return r.starts
}

func (r *running) remove(id, uid string, n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.daemons[[2]string{id, uid}]; ok && d.n == n {
		delete(r.daemons, [2]string{id, uid})
	}
}

func (r *running) stop(id, uid string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.daemons[[2]string{id, uid}]
	if ok {
		d.stop()
	}
	return ok
}

// stopAll asks every daemon to stop (the server is shutting down).
func (r *running) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.daemons {
		d.stop()
	}
}
