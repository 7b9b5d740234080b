// Kopf's 02-children in Go: a Pod for every KopfExample, owned by it, so that deleting the
// KopfExample garbage-collects the Pod. The handler only describes the Pod; the controller
// creates it, adopts it and records its UID in the result as `children`.
package main

import (
	"context"
	"fmt"
	"log"

	bosun "example.invalid/bosun/sdk-go"
)

// createFn renders the Pod from the spec and asks for it as a child (Kopf's kopf.adopt +
// pod.create()). The controller names it `<owner>-pod`, copies the owner's namespace and
// labels, sets the owner reference, and stores status.create_fn = {"children": [<uid>]}.
func createFn(_ context.Context, c *bosun.Cause) (any, error) {
	duration := fmt.Sprint(c.Spec()["duration"])
	field, ok := c.Spec()["field"].(string)
	if !ok {
		field = "default-value"
	}
	c.Adopt(map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"spec": map[string]any{
			"containers": []any{map[string]any{
				"name":    "the-only-one",
				"image":   "busybox",
				"command": []any{"sh", "-x", "-c"},
				"args":    []any{fmt.Sprintf("echo \"FIELD=$FIELD\"\nsleep %s\n", duration)},
				"env":     []any{map[string]any{"name": "FIELD", "value": field}},
			}},
		},
	})
	return nil, nil
}

func main() {
	op := bosun.New()
	// What the handlers create, so that `bosun rbac` gives the controller `create pods`.
	op.Owns("kopf.dev/v1/kopfexamples", "v1/pods")
	op.OnCreate("kopf.dev/v1/kopfexamples", createFn, bosun.ID("create_fn"))
	if err := op.Serve(context.Background()); err != nil {
		log.Fatal(err)
	}
}
