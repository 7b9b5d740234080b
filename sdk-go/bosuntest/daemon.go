package bosuntest

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// DaemonRun is a daemon running in-process: its streamed messages and its exit.
type DaemonRun struct {
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	messages []*pb.DaemonMessage
	changed  chan struct{}
	err      error
}

// Daemon starts handler id's daemon for body; stop it with Stop (as StopDaemon) or Cancel.
func (h *Harness) Daemon(id string, body map[string]any) *DaemonRun {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	run := &DaemonRun{cancel: cancel, done: make(chan struct{}), changed: make(chan struct{}, 1)}
	stream := &fakeStream{ctx: ctx, run: run}
	go func() {
		defer close(run.done)
		err := h.server.Daemon(&pb.DaemonRequest{HandlerId: id, Object: encode(h.t, body)}, stream)
		run.mu.Lock()
		run.err = err
		run.mu.Unlock()
	}()
	h.t.Cleanup(func() { cancel(); <-run.done })
	return run
}

// Stop asks the daemon to stop, as the controller's StopDaemon does; false when it is not
// running (not started yet, or ended).
func (h *Harness) Stop(id string, uid string) bool {
	response, _ := h.server.StopDaemon(context.Background(), &pb.StopDaemonRequest{HandlerId: id, Uid: uid})
	return response.GetStopping()
}

// Cancel cancels the call, as a controller that goes away does.
func (d *DaemonRun) Cancel() { d.cancel() }

// Wait waits until the daemon's stream ended (or ctx is done) and returns its messages, the
// exit last; the error is the call's own (not found, invalid JSON) or ctx's.
func (d *DaemonRun) Wait(ctx context.Context) ([]*pb.DaemonMessage, error) {
	select {
	case <-d.done:
	case <-ctx.Done():
		return d.Messages(), ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*pb.DaemonMessage(nil), d.messages...), d.err
}

// Messages are the messages streamed so far.
func (d *DaemonRun) Messages() []*pb.DaemonMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*pb.DaemonMessage(nil), d.messages...)
}

// WaitFor waits until a streamed message satisfies cond, or ctx is done.
func (d *DaemonRun) WaitFor(ctx context.Context, cond func(*pb.DaemonMessage) bool) (*pb.DaemonMessage, error) {
	for {
		for _, m := range d.Messages() {
			if cond(m) {
				return m, nil
			}
		}
		select {
		case <-d.changed:
		case <-d.done:
			for _, m := range d.Messages() {
				if cond(m) {
					return m, nil
				}
			}
			return nil, context.Canceled
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// fakeStream is the server side of a Daemon call, in-process.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
	run *DaemonRun
}

var _ grpc.ServerStreamingServer[pb.DaemonMessage] = (*fakeStream)(nil)

func (s *fakeStream) Send(m *pb.DaemonMessage) error {
	s.run.mu.Lock()
	s.run.messages = append(s.run.messages, m)
	s.run.mu.Unlock()
	select {
	case s.run.changed <- struct{}{}:
	default:
	}
	return nil
}

func (s *fakeStream) Context() context.Context     { return s.ctx }
func (s *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (s *fakeStream) SendHeader(metadata.MD) error { return nil }
func (s *fakeStream) SetTrailer(metadata.MD)       {}
