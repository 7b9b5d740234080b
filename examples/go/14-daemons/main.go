// Kopf's 14-daemons in Go: long-running functions per object. A daemon's ctx is cancelled
// when it is asked to stop (the object is deleted, stops matching, or the controller stops);
// Go has no difference between Kopf's sync and async daemons, so both are written alike.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	bosun "example.invalid/bosun/sdk-go"
)

const kex = "kopf.dev/v1/kopfexamples"

// backgroundSync fails its first 3 attempts, then pings every 5 s for 30 s (unless stopped),
// and says it finished.
func backgroundSync(ctx context.Context, c *bosun.Cause) (any, error) {
	if c.Retry < 3 {
		c.Patch.Status("message", fmt.Sprintf("Failed %d times.", c.Retry+1))
		return nil, bosun.TemporaryError{Message: "Simulated failure.", Delay: time.Second}
	}
	deadline := time.After(30 * time.Second)
	for {
		c.Logger.Info(fmt.Sprintf("=> Ping from a sync daemon: field=%q, retry=%d", c.Spec()["field"], c.Retry))
		select {
		case <-ctx.Done():
		case <-deadline:
		case <-time.After(5 * time.Second):
			continue
		}
		break
	}
	c.Patch.Status("message", "Accompanying is finished.")
	return nil, nil
}

// backgroundAsync fails its first 3 attempts, then pings every 5 s until stopped.
func backgroundAsync(ctx context.Context, c *bosun.Cause) (any, error) {
	if c.Retry < 3 {
		return nil, bosun.TemporaryError{Message: "Simulated failure.", Delay: time.Second}
	}
	for {
		c.Logger.Info(fmt.Sprintf("=> Ping from an async daemon: field=%q", c.Spec()["field"]))
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(5 * time.Second):
		}
	}
}

func main() {
	op := bosun.New()
	op.OnDaemon(kex, backgroundSync, bosun.ID("background_sync"), bosun.Backoff(3*time.Second))
	op.OnDaemon(kex, backgroundAsync, bosun.ID("background_async"), bosun.Backoff(3*time.Second),
		bosun.CancellationTimeout(500*time.Millisecond), bosun.Annotation("someannotation", "somevalue"))
	if err := op.Serve(context.Background()); err != nil {
		log.Fatal(err)
	}
}
