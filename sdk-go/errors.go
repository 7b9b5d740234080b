package bosun

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	pb "example.invalid/bosun/sdk-go/proto/bosunv1"
)

// TemporaryError says the handler failed but may succeed later (Kopf's kopf.TemporaryError):
// it is retried after Delay, or after the handler's backoff when Delay is zero.
type TemporaryError struct {
	// Message is logged by the controller and recorded in the handler's progress.
	Message string
	// Delay before the next attempt; zero means the handler's backoff.
	Delay time.Duration
}

func (e TemporaryError) Error() string { return e.Message }

// PermanentError says the handler failed and must not be retried for this cause (Kopf's
// kopf.PermanentError). For admission handlers it denies the request with Code (400 when 0).
type PermanentError struct {
	// Message is logged and recorded; for admission handlers, shown to the user.
	Message string
	// Code is the HTTP code of an admission denial; 0 means 400.
	Code int32
}

func (e PermanentError) Error() string { return e.Message }

// ran is how one call of a handler function ended: the outcome and what goes with it.
type ran struct {
	outcome pb.Outcome
	message string
	delay   *float64 // seconds; nil: the handler's backoff
	result  []byte   // JSON; empty when nil
	code    int32    // admission denials
}

// outcomeOf maps what a handler returned (its result, its error, a recovered panic) to an
// outcome: the pure core of every call.
func outcomeOf(result any, err error, panicked any) ran {
	if panicked != nil {
		return ran{outcome: pb.Outcome_OUTCOME_UNEXPECTED_ERROR, message: fmt.Sprintf("the handler panicked: %v", panicked)}
	}
	if err != nil {
		if t, ok := asTemporary(err); ok {
			r := ran{outcome: pb.Outcome_OUTCOME_TEMPORARY_ERROR, message: t.Message}
			if t.Delay > 0 {
				seconds := t.Delay.Seconds()
				r.delay = &seconds
			}
			return r
		}
		if p, ok := asPermanent(err); ok {
			return ran{outcome: pb.Outcome_OUTCOME_PERMANENT_ERROR, message: p.Message, code: p.Code}
		}
		return ran{outcome: pb.Outcome_OUTCOME_UNEXPECTED_ERROR, message: err.Error()}
	}
	encoded, encErr := encodeResult(result)
	if encErr != nil {
		return ran{outcome: pb.Outcome_OUTCOME_UNEXPECTED_ERROR, message: fmt.Sprintf("the handler's result cannot be encoded as JSON: %v", encErr)}
	}
	return ran{outcome: pb.Outcome_OUTCOME_SUCCESS, result: encoded}
}

// asTemporary finds a TemporaryError in err's chain, as a value or a pointer.
func asTemporary(err error) (TemporaryError, bool) {
	var value TemporaryError
	if errors.As(err, &value) {
		return value, true
	}
	var pointer *TemporaryError
	if errors.As(err, &pointer) && pointer != nil {
		return *pointer, true
	}
	return TemporaryError{}, false
}

// asPermanent finds a PermanentError in err's chain, as a value or a pointer.
func asPermanent(err error) (PermanentError, bool) {
	var value PermanentError
	if errors.As(err, &value) {
		return value, true
	}
	var pointer *PermanentError
	if errors.As(err, &pointer) && pointer != nil {
		return *pointer, true
	}
	return PermanentError{}, false
}

// call runs fn once, turning a panic into an unexpected error with its stack.
func call(fn func() (any, error)) (r ran) {
	defer func() {
		if p := recover(); p != nil {
			r = outcomeOf(nil, nil, fmt.Sprintf("%v\n%s", p, debug.Stack()))
		}
	}()
	result, err := fn()
	return outcomeOf(result, err, nil)
}
