// Kopf's 17-admission in Go: validating and mutating admission handlers. The controller
// serves the webhooks over HTTPS with a certificate of its own and configures the API server
// to call them (a Validating- and a MutatingWebhookConfiguration named `auto.bosun.dev`); on
// the dev cluster, `kubectl apply` of a bad object is refused with the handler's message, and
// the mutating handler's default is stored with the object.
//
// Kopf's startup handler chooses a webhook server; here the controller's flags do that
// (`--admission-listen`, `--admission-url`, …), so there is no startup handler.
package main

import (
	"context"
	"log"

	bosun "example.invalid/bosun/sdk-go"
)

const kex = "kopf.dev/v1/kopfexamples"

// authhook says who is asking, as a warning the client prints.
func authhook(_ context.Context, c *bosun.Cause) (any, error) {
	userInfo, _ := c.Admission["userInfo"].(map[string]any)
	user, _ := userInfo["username"].(string)
	if user == "" {
		user = "(unidentified)"
	}
	c.Warn("Accessing as user: " + user)
	return nil, nil
}

// validate1 refuses spec.field: wrong, except in a dry run.
func validate1(_ context.Context, c *bosun.Cause) (any, error) {
	if !c.DryRun() && c.Spec()["field"] == "wrong" {
		return nil, bosun.PermanentError{Message: "Meh! I don't like it. Change the field."}
	}
	return nil, nil
}

// validate2 is called only when spec.field is `not-allowed` (a field filter): it refuses
// with code 555.
func validate2(context.Context, *bosun.Cause) (any, error) {
	return nil, bosun.PermanentError{Message: "I'm too lazy anyway. Go away!", Code: 555}
}

// mutate1 fills spec.injected for objects labelled somelabel=somevalue.
func mutate1(_ context.Context, c *bosun.Cause) (any, error) {
	c.Patch.Spec("injected", 123)
	return nil, nil
}

func main() {
	op := bosun.New()
	op.OnValidate(kex, authhook, bosun.ID("authhook"))
	op.OnValidate(kex, validate1, bosun.ID("validate1"), bosun.FailClosed())
	op.OnValidate(kex, validate2, bosun.ID("validate2"), bosun.Field("spec.field"), bosun.Value("not-allowed"))
	op.OnMutate(kex, mutate1, bosun.ID("mutate1"), bosun.Label("somelabel", "somevalue"))
	if err := op.Serve(context.Background()); err != nil {
		log.Fatal(err)
	}
}
