// Kopf's 03-exceptions in Go: how errors decide what happens next. A PermanentError fails
// the handler at once; a TemporaryError retries after its delay; any other error is
// "unexpected": retried after the backoff (until Retries run out), or failed at once with
// Errors(bosun.ErrorsPermanent).
package main

import (
	"context"
	"errors"
	"log"
	"time"

	bosun "example.invalid/bosun/sdk-go"
)

const kex = "kopf.dev/v1/kopfexamples"

// errRecoverable is Kopf's MyException.
var errRecoverable = errors.New("An error that is supposed to be recoverable.")

func instantFailureWithOnlyAMessage(context.Context, *bosun.Cause) (any, error) {
	return nil, bosun.PermanentError{Message: "Fail once and for all."}
}

func eventualSuccessWithAFewMessages(_ context.Context, c *bosun.Cause) (any, error) {
	if c.Retry < 3 { // 0, 1, 2, 3
		return nil, bosun.TemporaryError{Message: "Expected recoverable error.", Delay: time.Second}
	}
	return nil, nil
}

func failWithAnUnexpectedError(context.Context, *bosun.Cause) (any, error) {
	return nil, errRecoverable
}

func main() {
	op := bosun.New()
	op.OnCreate(kex, instantFailureWithOnlyAMessage, bosun.ID("instant_failure_with_only_a_message"))
	op.OnCreate(kex, eventualSuccessWithAFewMessages, bosun.ID("eventual_success_with_a_few_messages"))
	op.OnCreate(kex, failWithAnUnexpectedError, bosun.ID("eventual_failure_with_tracebacks"),
		bosun.Retries(3), bosun.Backoff(time.Second))
	op.OnCreate(kex, failWithAnUnexpectedError, bosun.ID("instant_failure_with_traceback"),
		bosun.Errors(bosun.ErrorsPermanent), bosun.Backoff(time.Second))
	if err := op.Serve(context.Background()); err != nil {
		log.Fatal(err)
	}
}
