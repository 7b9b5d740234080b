// The Go SDK's conformance server: exactly the handler set of tests/conformance/README.md,
// registered with the bosun package and served where BOSUN_LISTEN says. The scenarios in
// tests/tests/conformance.rs run the real controller against it, and against the Rust and
// Python SDKs' servers, and expect the same outcomes.
//
// Every handler's behaviour is driven by the handled object's spec, so that one server serves
// every scenario; handlers whose spec key is absent do nothing and return nothing.
//
// Built by the harness (tests/src/conformance.rs), or by hand:
//
//	(cd sdk-go && go generate ./...) && (cd tests/conformance/go && go build -o ../../../target/go/conformance-server .)
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"

	bosun "example.invalid/bosun/sdk-go"
)

// kex is the resource every object handler serves: Kopf's KopfExample (examples/crd.yaml).
const kex = "kopf.dev/v1/kopfexamples"

const (
	timerLabel  = "conformance.bosun.dev/timer"
	daemonLabel = "conformance.bosun.dev/daemon"
	silentLabel = "conformance.bosun.dev/silent"
	// patcherLabel opts an object into the patching daemon, which patches every beat.
	patcherLabel = "conformance.bosun.dev/patcher"
	beat         = 100 * time.Millisecond
	// retryDelay is the errors handler's temporary delay, and its backoff.
	retryDelay = 500 * time.Millisecond
)

var (
	// startupRetry is the retry at which the startup activity succeeded; -1 before.
	startupRetry atomic.Int64
	// ticks counts the timer's calls per object uid.
	ticks   = map[string]int{}
	ticksMu sync.Mutex
)

func main() {
	startupRetry.Store(-1)
	op := bosun.New()
	op.ServerName("conformance-go")
	op.OnStartup(startup, bosun.ID("startup"))
	op.OnProbe(probe, bosun.ID("probe"))
	op.OnCleanup(cleanup, bosun.ID("cleanup"))
	op.OnCreate(kex, create, bosun.ID("create"))
	op.OnUpdate(kex, update, bosun.ID("update"))
	op.OnField(kex, "spec.field", field, bosun.ID("field"))
	op.OnResume(kex, resume, bosun.ID("resume"))
	op.OnDelete(kex, deleteFn, bosun.ID("delete"))
	op.OnCreate(kex, errorsFn, bosun.ID("errors"), bosun.Backoff(retryDelay))
	op.OnCreate(kex, patch, bosun.ID("patch"))
	op.OnCreate(kex, events, bosun.ID("events"))
	op.OnCreate(kex, children, bosun.ID("children"))
	op.OnCreate(kex, subhandlers, bosun.ID("subhandlers"), bosun.Subhandlers(subhandler))
	op.OnTimer(kex, retryDelay, timer, bosun.ID("timer"), bosun.Label(timerLabel, "yes"))
	op.OnDaemon(kex, daemon, bosun.ID("daemon"), bosun.Label(daemonLabel, "yes"))
	op.OnDaemon(kex, silent, bosun.ID("silent"), bosun.Label(silentLabel, "yes"))
	op.OnDaemon(kex, patcher, bosun.ID("patcher"), bosun.Label(patcherLabel, "yes"))
	op.OnCreate(kex, crash, bosun.ID("crash"), bosun.Backoff(retryDelay))
	if os.Getenv("CONFORMANCE_EXTRA") != "" {
		op.OnCreate(kex, extra, bosun.ID("extra"))
	}
	if err := op.Serve(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// startup fails temporarily on its first attempt, then remembers that it ran.
func startup(_ context.Context, c *bosun.Cause) (any, error) {
	if c.Retry == 0 {
		return nil, bosun.TemporaryError{Message: "conformance: startup not ready at retry 0", Delay: 200 * time.Millisecond}
	}
	startupRetry.Store(int64(c.Retry))
	c.Logger.Info("conformance: startup ran")
	return nil, nil
}

func probe(context.Context, *bosun.Cause) (any, error) { return map[string]any{"alive": true}, nil }

func cleanup(_ context.Context, c *bosun.Cause) (any, error) {
	c.Logger.Info("conformance: cleanup ran")
	return nil, nil
}

func create(_ context.Context, c *bosun.Cause) (any, error) {
	var startup any
	if retry := startupRetry.Load(); retry >= 0 {
		startup = retry
	}
	return map[string]any{"message": "created", "field": c.Spec()["field"], "startup": startup}, nil
}

func update(_ context.Context, c *bosun.Cause) (any, error) {
	return map[string]any{"message": "updated", "field": c.Spec()["field"]}, nil
}

func field(_ context.Context, c *bosun.Cause) (any, error) {
	return map[string]any{"old": c.Old, "new": c.New}, nil
}

func resume(context.Context, *bosun.Cause) (any, error) {
	return map[string]any{"message": "resumed"}, nil
}

func deleteFn(_ context.Context, c *bosun.Cause) (any, error) {
	c.InfoEvent("Deleting", "conformance: deleting "+c.Name())
	return nil, nil
}

// errorsFn fails as spec.fail says until spec.retriesBeforeSuccess attempts failed.
func errorsFn(_ context.Context, c *bosun.Cause) (any, error) {
	fail, ok := c.Spec()["fail"].(string)
	if !ok {
		return nil, nil
	}
	c.Patch.Status("attempts", c.Retry+1)
	before := 2
	if n, ok := c.Spec()["retriesBeforeSuccess"].(float64); ok {
		before = int(n)
	}
	failing := c.Retry < before
	switch {
	case fail == "permanent":
		return nil, bosun.PermanentError{Message: "conformance: permanent failure"}
	case fail == "temporary" && failing:
		return nil, bosun.TemporaryError{Message: fmt.Sprintf("conformance: temporary failure at retry %d", c.Retry), Delay: retryDelay}
	case fail == "unexpected" && failing:
		return nil, fmt.Errorf("conformance: unexpected failure at retry %d", c.Retry)
	case fail == "temporary" || fail == "unexpected":
		return map[string]any{"retry": c.Retry}, nil
	}
	return nil, bosun.PermanentError{Message: fmt.Sprintf("conformance: unknown spec.fail %q", fail)}
}

// patch applies spec.patch as its merge patch, with a null for each label of
// spec.removeLabels (the API server keeps no nulls in a spec).
func patch(_ context.Context, c *bosun.Cause) (any, error) {
	if fragment, ok := c.Spec()["patch"].(map[string]any); ok {
		c.Patch.Merge(fragment)
	}
	removed, _ := c.Spec()["removeLabels"].([]any)
	for _, key := range removed {
		if key, ok := key.(string); ok {
			c.Patch.RemoveLabel(key)
		}
	}
	return nil, nil
}

// events posts every event of spec.events about the object.
func events(_ context.Context, c *bosun.Cause) (any, error) {
	list, _ := c.Spec()["events"].([]any)
	for _, item := range list {
		event, _ := item.(map[string]any)
		text := func(key string) string { s, _ := event[key].(string); return s }
		c.Event(text("type"), text("reason"), text("message"))
	}
	return nil, nil
}

// children has the controller create and adopt a ConfigMap with spec.child as its data.
func children(_ context.Context, c *bosun.Cause) (any, error) {
	data, ok := c.Spec()["child"]
	if !ok {
		return nil, nil
	}
	c.Adopt(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data})
	return map[string]any{"message": "child requested"}, nil
}

// subhandlers declares one sub-handler per string item of spec.items.
func subhandlers(_ context.Context, c *bosun.Cause) (any, error) {
	items, _ := c.Spec()["items"].([]any)
	for _, item := range items {
		if item, ok := item.(string); ok {
			c.Subhandler(item, item)
		}
	}
	return nil, nil
}

func subhandler(_ context.Context, c *bosun.Cause) (any, error) {
	return map[string]any{"item": c.Param}, nil
}

// timer counts its calls per object (in the process: the object a timer gets may be older
// than the controller's last write) and patches the count into status.ticks.
func timer(_ context.Context, c *bosun.Cause) (any, error) {
	ticksMu.Lock()
	ticks[c.UID()]++
	count := ticks[c.UID()]
	ticksMu.Unlock()
	c.Patch.Status("ticks", count)
	return nil, nil
}

// daemon says it started (a log line and an event), waits to be stopped, and says so on
// stdout.
func daemon(ctx context.Context, c *bosun.Cause) (any, error) {
	c.Logger.Info("conformance: daemon started")
	c.InfoEvent("DaemonStarted", "conformance: daemon started")
	<-ctx.Done()
	fmt.Printf("conformance: daemon stopped for %s/%s\n", c.Namespace(), c.Name())
	return nil, nil
}

// silent sends nothing while it runs (it says so on stdout only), and takes 1 s to wind down
// once stopped: the controller must wait for it all the same.
func silent(ctx context.Context, c *bosun.Cause) (any, error) {
	fmt.Printf("conformance: silent daemon started for %s/%s\n", c.Namespace(), c.Name())
	<-ctx.Done()
	time.Sleep(time.Second)
	fmt.Printf("conformance: silent daemon stopped for %s/%s\n", c.Namespace(), c.Name())
	return nil, nil
}

// patcher patches its beat count every 100 ms while it runs (the Go SDK sends each patch at
// once), and once more when stopped, as it ends.
func patcher(ctx context.Context, c *bosun.Cause) (any, error) {
	fmt.Printf("conformance: patcher started for %s/%s\n", c.Namespace(), c.Name())
	ticker := time.NewTicker(beat)
	defer ticker.Stop()
	for beats := 1; ; beats++ {
		select {
		case <-ctx.Done():
			c.Patch.Status("patcher", "stopped")
			fmt.Printf("conformance: patcher stopped for %s/%s\n", c.Namespace(), c.Name())
			return nil, nil
		case <-ticker.C:
			c.Patch.Status("beats", beats)
		}
	}
}

// crash ends its own server at once on its first call for an object with spec.crash (as an
// OOM kill or a segfault would: no answer, no cleanup), and answers on the next call.
func crash(_ context.Context, c *bosun.Cause) (any, error) {
	if v, _ := c.Spec()["crash"].(bool); !v {
		return nil, nil
	}
	if c.Retry == 0 {
		fmt.Println("conformance: crashing")
		os.Exit(3)
	}
	return map[string]any{"retry": c.Retry}, nil
}

// extra is registered only with CONFORMANCE_EXTRA set (a server started again with a changed
// registry).
func extra(context.Context, *bosun.Cause) (any, error) {
	return map[string]any{"message": "extra"}, nil
}
