package bosun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// handler is one registered handler: what it reacts to, its filters and options, its function.
type handler struct {
	id        string
	kind      pb.HandlerKind
	resource  string // as registered; "" for activities
	selector  Selector
	field     string // HandlerSpec.field: field handlers, and update handlers with Field
	filters   *pb.Filters
	options   *pb.HandlerOptions
	when      func(*Cause) bool
	fn        HandlerFunc
	children  HandlerFunc
	timer     *pb.TimerOptions
	daemon    *pb.DaemonOptions
	admission *pb.AdmissionOptions
	misplaced []string // options given to a kind they do not fit
}

// registry is the validated, frozen set of handlers a server serves.
type registry struct {
	serverName string
	handlers   []*handler
	byID       map[string]*handler
	resources  []*pb.ResourceSettings
	settings   *pb.OperatorSettings
}

func isActivity(kind pb.HandlerKind) bool {
	return kind == pb.HandlerKind_HANDLER_KIND_STARTUP || kind == pb.HandlerKind_HANDLER_KIND_CLEANUP || kind == pb.HandlerKind_HANDLER_KIND_PROBE
}

func isAdmission(kind pb.HandlerKind) bool {
	return kind == pb.HandlerKind_HANDLER_KIND_VALIDATE || kind == pb.HandlerKind_HANDLER_KIND_MUTATE
}

// rpcOf names the call that runs handlers of a kind.
func rpcOf(kind pb.HandlerKind) string {
	switch {
	case kind == pb.HandlerKind_HANDLER_KIND_DAEMON:
		return "Daemon"
	case isActivity(kind):
		return "Activity"
	case isAdmission(kind):
		return "Admit"
	}
	return "Handle"
}

// newRegistry validates the registrations: ids completed and unique, selectors parsed,
// options fitting their kinds. The first mistake is the error.
func newRegistry(name string, handlers []*handler, ignored, owns []resourcePaths) (*registry, error) {
	if len(handlers) == 0 {
		return nil, errors.New("no handlers are registered: add some with OnCreate(...) and the like")
	}
	r := &registry{serverName: name, byID: map[string]*handler{}}
	if r.serverName == "" {
		r.serverName = strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe")
	}
	for _, registered := range handlers {
		h := *registered // the operator's copy stays as registered
		if !isActivity(h.kind) {
			selector, err := ParseSelector(h.resource)
			if err != nil {
				return nil, err
			}
			h.selector = selector
		}
		field := h.field
		if field == "" {
			field = h.filters.GetField()
		}
		if field != "" {
			h.id += "/" + field
		}
		if err := checkOptions(&h); err != nil {
			return nil, err
		}
		if _, taken := r.byID[h.id]; taken {
			return nil, fmt.Errorf("two handlers have the id %q: give one of them another ID", h.id)
		}
		r.byID[h.id] = &h
		r.handlers = append(r.handlers, &h)
	}
	settingsOf := func(resource string) (*pb.ResourceSettings, error) {
		selector, err := ParseSelector(resource)
		if err != nil {
			return nil, err
		}
		for _, s := range r.resources {
			if s.Resource.Group == selector.Group && s.Resource.Version == selector.Version && s.Resource.Name == selector.Name {
				return s, nil
			}
		}
		s := &pb.ResourceSettings{Resource: selector.proto()}
		r.resources = append(r.resources, s)
		return s, nil
	}
	for _, i := range ignored {
		s, err := settingsOf(i.resource)
		if err != nil {
			return nil, err
		}
		s.IgnoredFields = append(s.IgnoredFields, i.values...)
	}
	for _, o := range owns {
		s, err := settingsOf(o.resource)
		if err != nil {
			return nil, err
		}
		for _, kind := range o.values {
			selector, err := ParseSelector(kind)
			if err != nil {
				return nil, err
			}
			s.Owns = append(s.Owns, selector.proto())
		}
	}
	return r, nil
}

func checkOptions(h *handler) error {
	invalid := func(message string) error { return fmt.Errorf("handler %q: %s", h.id, message) }
	kind := h.kind
	switch {
	case h.id == "":
		return invalid("the id is empty")
	case h.fn == nil:
		return invalid("the function is nil")
	case len(h.misplaced) > 0:
		return invalid(h.misplaced[0])
	case h.options.Optional && kind != pb.HandlerKind_HANDLER_KIND_DELETE:
		return invalid("Optional only applies to deletion handlers")
	case h.options.Deleted && kind != pb.HandlerKind_HANDLER_KIND_RESUME:
		return invalid("Deleted only applies to resuming handlers")
	case kind == pb.HandlerKind_HANDLER_KIND_TIMER && h.timer.GetIntervalSeconds() <= 0:
		return invalid("a timer's interval must be positive")
	case kind == pb.HandlerKind_HANDLER_KIND_FIELD && h.field == "":
		return invalid("a field handler needs a field")
	case h.filters.Value != nil && h.filters.Field == "":
		return invalid("Value needs a Field to check")
	case (h.filters.Old != nil || h.filters.New != nil) && kind != pb.HandlerKind_HANDLER_KIND_UPDATE && kind != pb.HandlerKind_HANDLER_KIND_FIELD:
		return invalid("OldValue and NewValue only apply to update and field handlers")
	case h.children != nil && rpcOf(kind) != "Handle":
		return invalid("Subhandlers only apply to handlers called through Handle")
	}
	return nil
}

// route finds the handler of a called id, and the sub-handler's own id when the call is for
// one: the id itself, else the longest registered id followed by `/` (ids may contain `/`,
// like `field_fn/spec.field`, so `field_fn/spec.field/item1` is that handler's `item1`).
func (r *registry) route(id string) (*handler, string, bool) {
	if h, ok := r.byID[id]; ok {
		return h, "", true
	}
	for cut := len(id); ; {
		slash := strings.LastIndex(id[:cut], "/")
		if slash < 0 {
			return nil, "", false
		}
		if h, ok := r.byID[id[:slash]]; ok {
			return h, id[slash+1:], true
		}
		cut = slash
	}
}

// ids lists the handlers of one call (Handle, Activity…), in registration order.
func (r *registry) ids(rpc string) string {
	var ids []string
	for _, h := range r.handlers {
		if rpcOf(h.kind) == rpc {
			ids = append(ids, h.id)
		}
	}
	return strings.Join(ids, ", ")
}

// describe is the Describe answer.
func (r *registry) describe() *pb.DescribeResponse {
	response := &pb.DescribeResponse{ServerName: r.serverName, Resources: r.resources, Settings: r.settings}
	for _, h := range r.handlers {
		spec := &pb.HandlerSpec{
			Id:        h.id,
			Kind:      h.kind,
			Field:     h.field,
			Options:   h.options,
			Timer:     h.timer,
			Daemon:    h.daemon,
			Admission: h.admission,
			Filters: &pb.Filters{
				Labels: h.filters.Labels, Annotations: h.filters.Annotations, Field: h.filters.Field,
				Value: h.filters.Value, Old: h.filters.Old, New: h.filters.New, HasWhen: h.when != nil,
			},
		}
		if !isActivity(h.kind) {
			spec.Resource = h.selector.proto()
		}
		response.Handlers = append(response.Handlers, spec)
	}
	return response
}
