package bosun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// ListenEnv is the environment variable that says where a handler server listens.
const ListenEnv = "BOSUN_LISTEN"

// DefaultListen is where a handler server listens when BOSUN_LISTEN is not set.
const DefaultListen = "127.0.0.1:50051"

// graceTime is how long in-flight calls get to finish once the server stops.
const graceTime = 5 * time.Second

// ParseListen parses a listen address: `host:port`, `http://host:port` or `unix:///path`;
// it returns the network ("tcp" or "unix") and the address.
func ParseListen(address string) (network, addr string, err error) {
	invalid := fmt.Errorf("invalid listen address %q: expected `host:port`, `http://host:port` or `unix:///path`", address)
	s := strings.TrimSpace(address)
	if path, ok := strings.CutPrefix(s, "unix://"); ok || strings.HasPrefix(s, "unix:") {
		if !ok {
			path = strings.TrimPrefix(s, "unix:")
		}
		if path == "" {
			return "", "", invalid
		}
		return "unix", path, nil
	}
	hostport := strings.TrimSuffix(strings.TrimPrefix(s, "http://"), "/")
	host, port, splitErr := net.SplitHostPort(hostport)
	if splitErr != nil || host == "" || strings.Contains(hostport, "/") {
		return "", "", invalid
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return "", "", invalid
	}
	return "tcp", hostport, nil
}

// Serve serves the handlers where BOSUN_LISTEN says (default 127.0.0.1:50051) until ctx is
// cancelled or the process gets SIGINT or SIGTERM; then in-flight calls get a few seconds
// to finish and daemons are asked to stop. It returns the registrations' mistakes, a listen
// failure, or nil after a clean stop.
func (op *Operator) Serve(ctx context.Context) error {
	address := os.Getenv(ListenEnv)
	if strings.TrimSpace(address) == "" {
		address = DefaultListen
	}
	network, addr, err := ParseListen(address)
	if err != nil {
		return err
	}
	server, err := op.NewServer()
	if err != nil {
		return fmt.Errorf("cannot serve the handlers: %w", err)
	}
	if network == "unix" {
		if info, err := os.Stat(addr); err == nil && info.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(addr) // a socket left by a previous run
		}
	}
	listener, err := net.Listen(network, addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", address, err)
	}
	ctx, cancel := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	return server.ServeListener(ctx, listener)
}

// ServeListener serves on a listener of the caller's until ctx is cancelled: for tests (listen
// on 127.0.0.1:0) and embedding. It does not touch signals.
func (s *Server) ServeListener(ctx context.Context, listener net.Listener) error {
	grpcServer := grpc.NewServer()
	healthServer := health.NewServer()
	healthServer.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthServer.SetServingStatus("bosun.v1.HandlerServer", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(grpcServer, healthServer)
	pb.RegisterHandlerServerServer(grpcServer, s)
	n := len(s.reg.handlers)
	slog.Info(fmt.Sprintf("Serving %d handler%s on %s", n, map[bool]string{true: "", false: "s"}[n == 1], listener.Addr()))

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		slog.Info("Stopping: in-flight calls finish, new ones are refused.")
		healthServer.Shutdown()
		s.running.stopAll()
		graceful := make(chan struct{})
		go func() { grpcServer.GracefulStop(); close(graceful) }()
		select {
		case <-graceful:
		case <-time.After(graceTime):
			grpcServer.Stop()
		}
	}()
	err := grpcServer.Serve(listener)
	if ctx.Err() != nil {
		<-stopped
		return nil
	}
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}
