// The Go examples end to end: each example is built, then run by the real controller
// (`bosun dev`, with the binary of BOSUN_BINARY or target/debug/bosun) on its embedded dev
// cluster with examples/crd.yaml and examples/obj.yaml applied, and the test waits (with a
// deadline) for the lines and objects the Rust and Python examples' tests expect. Without the
// bosun binary or kubectl the tests are skipped (`go test -v` says why), under CI=true they
// fail.
package examples_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.invalid/bosun/sdk-go/bosuntest"
)

// deadline bounds every wait for a line or an object.
const deadline = 60 * time.Second

// obj is the prefix of the demo object's lines (examples/obj.yaml).
const obj = "[default/kopf-example-1]"

// build builds one example's binary into the test's temporary folder.
func build(t *testing.T, folder string) string {
	t.Helper()
	// `go test` puts its own GOROOT/bin first on the PATH of the tests.
	binary := filepath.Join(t.TempDir(), folder)
	out, err := exec.Command("go", "build", "-o", binary, "./"+folder).CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./%s: %v\n%s", folder, err, out)
	}
	return binary
}

// dev runs the example under `bosun dev` with the CRD and, when withObject, the demo object.
func dev(t *testing.T, folder string, withObject bool) *bosuntest.Runner {
	t.Helper()
	args := []string{"--apply", "../crd.yaml"}
	if withObject {
		args = append(args, "--apply", "../obj.yaml")
	}
	binary := build(t, folder) // built first: a missing bosun binary then skips the rest
	return bosuntest.Dev(t, append(args, "--", binary)...)
}

// kubectl runs kubectl against the runner's dev cluster; stdin may be empty.
func kubectl(t *testing.T, r *bosuntest.Runner, stdin string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", filepath.Join(r.Dir, "kubeconfig")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func requireKubectl(t *testing.T) {
	t.Helper()
	err := exec.Command("kubectl", "version", "--client").Run()
	bosuntest.RequireTool(t, "kubectl on the PATH", err == nil)
}

// stopCleanly stops bosun as Ctrl-C does and fails the test unless it exits cleanly.
func stopCleanly(t *testing.T, r *bosuntest.Runner) {
	t.Helper()
	if err := r.Stop(deadline); err != nil {
		t.Fatalf("bosun did not exit cleanly: %v\n%s", err, strings.Join(r.Output(), "\n"))
	}
}

func TestExample01MinimalStoresTheResult(t *testing.T) {
	r := dev(t, "01-minimal", true)
	r.WaitFor(obj+" And here we are! Creating: map[duration:1m field:value", deadline)
	r.WaitFor(obj+" Handler 'create_fn' succeeded.", deadline)
	r.WaitFor(obj+" Creation is processed: 1 succeeded; 0 failed.", deadline)
	stopCleanly(t, r)
}

func TestExample02ChildrenCreatesAnOwnedPod(t *testing.T) {
	requireKubectl(t)
	r := dev(t, "02-children", true)
	r.WaitFor(obj+" Handler 'create_fn' succeeded.", deadline)
	r.WaitFor(obj+" Creation is processed: 1 succeeded; 0 failed.", deadline)
	out, ok := kubectl(t, r, "", "get", "pods", "-n", "default", "-l", "somelabel=somevalue", "-o", "json")
	var pods struct {
		Items []struct {
			Metadata struct {
				UID             string `json:"uid"`
				OwnerReferences []struct {
					Name string `json:"name"`
				} `json:"ownerReferences"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if !ok || json.Unmarshal([]byte(out), &pods) != nil || len(pods.Items) != 1 {
		t.Fatalf("one labelled pod: %s", out)
	}
	pod := pods.Items[0].Metadata
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].Name != "kopf-example-1" {
		t.Errorf("the pod is owned by the KopfExample: %s", out)
	}
	out, ok = kubectl(t, r, "", "get", "kopfexamples", "kopf-example-1", "-n", "default", "-o", "jsonpath={.status.create_fn.children}")
	if !ok || out != `["`+pod.UID+`"]` {
		t.Errorf("status.create_fn.children is the pod's uid %s: %s", pod.UID, out)
	}
	stopCleanly(t, r)
}

func TestExample03ExceptionsRetryAndFailAsKopfDoes(t *testing.T) {
	r := dev(t, "03-exceptions", true)
	r.WaitFor(obj+" Creation is processed: 1 succeeded; 3 failed.", deadline)
	counts := map[string]int{
		"Handler 'instant_failure_with_only_a_message' failed permanently: Fail once and for all.":                                          1,
		"Handler 'eventual_success_with_a_few_messages' failed temporarily: Expected recoverable error.":                                    3,
		"Handler 'eventual_success_with_a_few_messages' succeeded.":                                                                         1,
		"Handler 'eventual_failure_with_tracebacks' failed with an exception. Will retry.":                                                  3,
		"Handler 'eventual_failure_with_tracebacks' failed permanently: Handler 'eventual_failure_with_tracebacks' has exceeded 3 retries.": 1,
		"Handler 'instant_failure_with_traceback' failed permanently: An error that is supposed to be recoverable.":                         1,
	}
	for line, want := range counts {
		if got := r.Count(obj + " " + line); got != want {
			t.Errorf("%q: %d times, want %d\n%s", line, got, want, strings.Join(r.Output(), "\n"))
		}
	}
	stopCleanly(t, r)
}

func TestExample14DaemonsPingAndStopWithTheController(t *testing.T) {
	r := dev(t, "14-daemons", true)
	r.WaitFor("Simulated failure.", deadline)
	r.WaitFor(obj+` => Ping from a sync daemon: field="value", retry=3`, deadline)
	r.WaitFor(obj+` => Ping from an async daemon: field="value"`, deadline)
	// Stopping the controller stops the daemons (StopDaemon) and waits for them: the sync one
	// returns and succeeds.
	stopCleanly(t, r)
	if r.Count(obj+" Daemon 'background_sync' succeeded.") != 1 {
		t.Errorf("the sync daemon succeeded once it was stopped:\n%s", strings.Join(r.Output(), "\n"))
	}
}

func kex(name, field, labels string) string {
	return "apiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata:\n  name: " + name + "\n  namespace: default\n  labels: {" +
		labels + "}\nspec:\n  field: " + field + "\n"
}

func TestExample17AdmissionDeniesAndMutatesThroughKubectl(t *testing.T) {
	requireKubectl(t)
	r := dev(t, "17-admission", false)
	r.WaitFor("MutatingWebhookConfiguration 'auto.bosun.dev' is created: 1 webhook(s).", deadline)
	out, ok := kubectl(t, r, kex("wrong-1", "wrong", ""), "apply", "-f", "-")
	if ok || !strings.Contains(out, `admission webhook "validate1.auto.bosun.dev" denied the request: Meh! I don't like it. Change the field.`) {
		t.Errorf("a wrong field is refused: %s", out)
	}
	out, ok = kubectl(t, r, kex("lazy-1", "not-allowed", ""), "apply", "-f", "-")
	if ok || !strings.Contains(out, "denied the request: I'm too lazy anyway. Go away!") {
		t.Errorf("validate2 refuses: %s", out)
	}
	if out, ok = kubectl(t, r, kex("dry-1", "wrong", ""), "apply", "-f", "-", "--dry-run=server"); !ok {
		t.Errorf("a dry run is allowed: %s", out)
	}
	out, ok = kubectl(t, r, kex("good-1", "value", "somelabel: somevalue"), "apply", "-f", "-")
	if !ok || !strings.Contains(out, "Warning: Accessing as user: ") {
		t.Errorf("a good object is stored, with authhook's warning: %s", out)
	}
	if out, _ = kubectl(t, r, "", "get", "kex", "good-1", "-n", "default", "-o", "jsonpath={.spec.injected}"); out != "123" {
		t.Errorf("mutate1 injected spec.injected: %q", out)
	}
	stopCleanly(t, r)
}
