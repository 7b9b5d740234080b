package bosun

import (
	"fmt"
	"strings"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// Selector names the resource a handler handles, as `kubectl get` would. The controller
// resolves it through the API server's discovery.
type Selector struct {
	// Group is the API group; empty for the core group or when not given.
	Group string
	// Version is the API version; empty means the group's preferred version.
	Version string
	// Name is a plural, singular, kind, short name or category.
	Name string
}

// ParseSelector parses the resource strings handlers are registered with:
//   - `group/version/name`: `kopf.dev/v1/kopfexamples`, `apps/v1/deployments`;
//   - `version/name` for the core group: `v1/pods`;
//   - `group/name` (any version): `kopf.dev/kopfexamples`;
//   - `name.version.group` or `name.group`: `deployments.v1.apps`, `kopfexamples.kopf.dev`;
//   - `name` alone: a plural, singular, kind or short name (`kopfexamples`, `kex`).
func ParseSelector(s string) (Selector, error) {
	invalid := fmt.Errorf("invalid resource selector %q: expected `group/version/plural`, `version/plural`, `plural.group`, a kind or a short name", s)
	parts := strings.Split(strings.TrimSpace(s), "/")
	for _, p := range parts {
		if p == "" || strings.ContainsAny(p, " \t\n") {
			return Selector{}, invalid
		}
	}
	switch len(parts) {
	case 3:
		return Selector{Group: parts[0], Version: parts[1], Name: parts[2]}, nil
	case 2:
		if looksLikeVersion(parts[0]) {
			return Selector{Version: parts[0], Name: parts[1]}, nil
		}
		return Selector{Group: parts[0], Name: parts[1]}, nil
	case 1:
		name, rest, dotted := strings.Cut(parts[0], ".")
		if !dotted {
			return Selector{Name: name}, nil
		}
		for _, p := range strings.Split(rest, ".") {
			if p == "" {
				return Selector{}, invalid
			}
		}
		if version, group, ok := strings.Cut(rest, "."); ok && looksLikeVersion(version) {
			return Selector{Group: group, Version: version, Name: name}, nil
		}
		return Selector{Group: rest, Name: name}, nil
	}
	return Selector{}, invalid
}

func (s Selector) String() string {
	switch {
	case s.Group == "" && s.Version == "":
		return s.Name
	case s.Group == "":
		return s.Version + "/" + s.Name
	case s.Version == "":
		return s.Name + "." + s.Group
	}
	return s.Group + "/" + s.Version + "/" + s.Name
}

func (s Selector) proto() *pb.ResourceSelector {
	return &pb.ResourceSelector{Group: s.Group, Version: s.Version, Name: s.Name}
}

// looksLikeVersion tells Kubernetes API versions (`v1`, `v2beta1`, `v1alpha3`) from names.
func looksLikeVersion(s string) bool {
	rest, ok := strings.CutPrefix(s, "v")
	if !ok {
		return false
	}
	digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
	if digits == 0 {
		return false
	}
	tail := rest[digits:]
	if tail == "" {
		return true
	}
	for _, stage := range []string{"alpha", "beta"} {
		if n, ok := strings.CutPrefix(tail, stage); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}
