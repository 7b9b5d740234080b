// Package bosun writes Bosun handler servers in Go, with Kopf's semantics.
//
// The Bosun controller watches Kubernetes, detects causes (creation, update, deletion,
// resumption, field changes, timers, daemons…), records progress on the objects and calls the
// handlers of a handler server over gRPC (the contract `proto/bosun/v1/handler.proto`). A
// handler server only computes: this package registers Go functions per resource and cause and
// answers the controller's calls.
//
//	op := bosun.New()
//	op.OnCreate("kopfexamples", func(ctx context.Context, c *bosun.Cause) (any, error) {
//		c.Logger.Info("And here we are!", "spec", c.Spec())
//		return map[string]any{"message": "hello world"}, nil // stored at status.create_fn
//	}, bosun.ID("create_fn"))
//	if err := op.Serve(context.Background()); err != nil { // where BOSUN_LISTEN says
//		log.Fatal(err)
//	}
//
// A handler returns a result (stored at status.<id> unless nil) and an error:
// [TemporaryError] (retried after its delay), [PermanentError] (not retried), or any other
// error (unexpected: the handler's [ErrorsMode] decides). A panic in a handler is an
// unexpected error; the server keeps running. Failures are outcomes in the answer, never
// gRPC errors.
//
// Calls are at-least-once: after a crash of either side an attempt may be repeated, so
// handlers must be idempotent.
//
// Package bosuntest runs handlers in-process, without a controller, for unit tests.
package bosun
