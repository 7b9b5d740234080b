package bosun

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// Server answers the controller's calls (the bosun.v1.HandlerServer service) from a
// validated registry: it routes each call to its handler and turns whatever happens
// (success, errors, panics, a When that does not hold) into the answer. Serve runs one over
// gRPC; package bosuntest calls one in-process.
type Server struct {
	pb.UnimplementedHandlerServerServer
	reg       *registry
	indices   *indices
	running   *running
	described atomic.Bool
}

// NewServer validates the operator's registrations and returns its server.
func (op *Operator) NewServer() (*Server, error) {
	reg, err := op.build()
	if err != nil {
		return nil, err
	}
	s := &Server{reg: reg, indices: newIndices(), running: newRunning()}
	for _, h := range reg.handlers {
		if h.kind == pb.HandlerKind_HANDLER_KIND_INDEX {
			s.indices.add(h.id)
		}
	}
	return s, nil
}

// Describe lists the handlers.
func (s *Server) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	s.described.Store(true)
	return s.reg.describe(), nil
}

// Handle runs one attempt of one handler (or sub-handler) for one object.
func (s *Server) Handle(ctx context.Context, request *pb.HandleRequest) (*pb.HandleResponse, error) {
	// A server with indices that no controller described since it started has empty ones: the
	// controller fills them once it describes the server again; until then, other calls are
	// UNAVAILABLE (the object waits) rather than run against an empty index.
	if s.indices.any() && !s.described.Load() && request.GetReason() != pb.Reason_REASON_INDEX {
		return nil, status.Error(codes.Unavailable, "this handler server has just started and its indices are empty: it waits to be described")
	}
	h, child, ok := s.reg.route(request.GetHandlerId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "handler server %q has no handler %q; it has: %s", s.reg.serverName, request.GetHandlerId(), s.reg.ids("Handle"))
	}
	if rpc := rpcOf(h.kind); rpc != "Handle" {
		return nil, status.Errorf(codes.InvalidArgument, "handler %q is called through %s, not Handle", h.id, rpc)
	}
	cause, err := causeFromRequest(request)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cause.indices = s.indices
	fn := h.fn
	if child != "" {
		if h.children == nil {
			return nil, status.Errorf(codes.NotFound, "handler %q has no Subhandlers function for its sub-handler %q", h.id, child)
		}
		fn, cause.SubhandlerID = h.children, child
	}
	response := &pb.HandleResponse{}
	index := s.indices.get(h.id)
	if h.kind != pb.HandlerKind_HANDLER_KIND_INDEX {
		index = nil
	}
	object := objectKey(cause.Body)
	if index != nil {
		if request.GetEventType() == "DELETED" {
			index.forget(object)
			return response, nil
		}
		if index.excluded(object, time.Now()) {
			response.Outcome = pb.Outcome_OUTCOME_SKIPPED
			return response, nil
		}
	}
	// A parent's When decided whether its sub-handlers were declared: they are not re-checked.
	if h.when != nil && child == "" {
		holds, panicked := evaluate(h.when, cause)
		if panicked != "" {
			response.Outcome, response.Message = pb.Outcome_OUTCOME_UNEXPECTED_ERROR, "the When predicate panicked: "+panicked
			return response, nil
		}
		if !holds {
			if index != nil {
				index.forget(object)
			}
			response.Outcome = pb.Outcome_OUTCOME_SKIPPED
			return response, nil
		}
	}
	var result any
	r := call(func() (any, error) {
		var err error
		result, err = fn(ctx, cause)
		return result, err
	})
	if index != nil {
		r = index.apply(h.options, object, result, r, time.Now())
	}
	response.Outcome, response.Message, response.DelaySeconds, response.Result = r.outcome, r.message, r.delay, r.result
	cause.fill(response)
	return response, nil
}

// Activity runs one attempt of a startup, cleanup or probe handler.
func (s *Server) Activity(ctx context.Context, request *pb.ActivityRequest) (*pb.ActivityResponse, error) {
	h, child, ok := s.reg.route(request.GetHandlerId())
	if !ok || child != "" || !isActivity(h.kind) {
		return nil, status.Errorf(codes.NotFound, "handler server %q has no activity %q; it has: %s", s.reg.serverName, request.GetHandlerId(), s.reg.ids("Activity"))
	}
	cause := NewCause(nil)
	cause.HandlerID, cause.Retry, cause.indices = h.id, int(request.GetRetry()), s.indices
	if h.kind == pb.HandlerKind_HANDLER_KIND_STARTUP {
		cause.Settings = &pb.OperatorSettings{}
	}
	r := call(func() (any, error) { return h.fn(ctx, cause) })
	response := &pb.ActivityResponse{Outcome: r.outcome, Message: r.message, DelaySeconds: r.delay, Result: r.result}
	response.Logs = logLines(cause.Logs())
	if cause.Settings != nil && proto.Size(cause.Settings) > 0 {
		response.Settings = cause.Settings
	}
	return response, nil
}

// Admit reviews one admission request for a validating or mutating handler.
func (s *Server) Admit(ctx context.Context, request *pb.AdmitRequest) (*pb.AdmitResponse, error) {
	h, child, ok := s.reg.route(request.GetHandlerId())
	if !ok || child != "" || !isAdmission(h.kind) {
		return nil, status.Errorf(codes.NotFound, "handler server %q has no admission handler %q; it has: %s", s.reg.serverName, request.GetHandlerId(), s.reg.ids("Admit"))
	}
	cause, err := causeFromAdmission(request)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cause.indices = s.indices
	r := call(func() (any, error) { return h.fn(ctx, cause) })
	response := &pb.AdmitResponse{Allowed: r.outcome == pb.Outcome_OUTCOME_SUCCESS, Message: r.message, Code: r.code}
	if h.kind == pb.HandlerKind_HANDLER_KIND_MUTATE && response.Allowed {
		response.MergePatch, _ = cause.Patch.take()
	}
	cause.out.mu.Lock()
	response.Warnings = cause.out.warnings
	cause.out.mu.Unlock()
	return response, nil
}

// evaluate runs a When predicate; a panic is reported, not raised.
func evaluate(when func(*Cause) bool, cause *Cause) (holds bool, panicked string) {
	defer func() {
		if p := recover(); p != nil {
			holds, panicked = false, fmt.Sprint(p)
		}
	}()
	return when(cause), ""
}

// objectKey names an object in an index: its uid, else namespace/name.
func objectKey(body map[string]any) string {
	meta, _ := body["metadata"].(map[string]any)
	if uid, _ := meta["uid"].(string); uid != "" {
		return uid
	}
	namespace, _ := meta["namespace"].(string)
	name, _ := meta["name"].(string)
	return fmt.Sprintf("%s/%s", namespace, name)
}
