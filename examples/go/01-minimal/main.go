// Kopf's 01-minimal in Go: the least code for a working handler server. One creation
// handler, create_fn, whose result {"message": "hello world"} is stored at status.create_fn.
package main

import (
	"context"
	"fmt"
	"log"

	bosun "example.invalid/bosun/sdk-go"
)

// create_fn's id is its name, as in Kopf.
func create_fn(_ context.Context, c *bosun.Cause) (any, error) { //nolint:revive // Kopf's name
	c.Logger.Info(fmt.Sprintf("And here we are! Creating: %v", c.Spec()))
	return map[string]any{"message": "hello world"}, nil // will be the new status.create_fn
}

func main() {
	op := bosun.New()
	op.OnCreate("kopf.dev/v1/kopfexamples", create_fn)
	if err := op.Serve(context.Background()); err != nil {
		log.Fatal(err)
	}
}
