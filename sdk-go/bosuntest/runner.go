package bosuntest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireTool lets a test go on when the tool it needs (what) is present. When it is not, the
// test fails under CI (CI=true, where every tool must be installed) and is skipped, saying
// why, elsewhere (`go test -v` shows the reason). It never passes silently.
func RequireTool(t testing.TB, what string, present bool) {
	t.Helper()
	if present {
		return
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "0" && ci != "false" {
		t.Fatalf("this test needs %s, which is missing; under CI (CI=%s) that fails the test", what, ci)
	}
	fmt.Fprintf(os.Stderr, "SKIPPED %s: %s is missing (under CI=true this fails)\n", t.Name(), what)
	t.Skipf("%s is missing (under CI=true this fails)", what)
}

// BosunBinary finds the `bosun` binary: $BOSUN_BINARY, else target/debug/bosun in this
// directory or one above it (the repository's build), else `bosun` on the PATH; "" when none.
func BosunBinary() string {
	if binary := os.Getenv("BOSUN_BINARY"); binary != "" {
		return binary
	}
	if dir, err := os.Getwd(); err == nil {
		for ; ; dir = filepath.Dir(dir) {
			candidate := filepath.Join(dir, "target", "debug", "bosun")
			if info, err := os.Stat(candidate); err == nil && !info.IsDir() {
				return candidate
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if path, err := exec.LookPath("bosun"); err == nil {
		return path
	}
	return ""
}

// Runner runs `bosun ARGS…` (Kopf's KopfRunner for Bosun) in the background of a test and
// collects what it prints, the handler server's lines included.
type Runner struct {
	// Dir is the dev cluster's folder (--dir) for Dev, where its `kubeconfig` is.
	Dir     string
	t       testing.TB
	cmd     *exec.Cmd
	mu      sync.Mutex
	lines   []string
	changed chan struct{}
	done    chan struct{}
	err     error
}

// Dev starts `bosun dev --dir <a temporary dir> ARGS…` with the binary of BosunBinary (a
// missing one: RequireTool), for example Dev(t, "--apply", "crd.yaml", "--", "./server").
// The kubeconfig of its dev cluster is Kubeconfig(). The test's cleanup stops it.
func Dev(t testing.TB, args ...string) *Runner {
	t.Helper()
	binary := BosunBinary()
	RequireTool(t, "the bosun binary (BOSUN_BINARY, target/debug/bosun: cargo build -p bosun-controller --features cli --bin bosun)", binary != "")
	dir := t.TempDir()
	r := Start(t, binary, append([]string{"dev", "--dir", dir}, args...)...)
	r.Dir = dir
	return r
}

// Start runs a command as a Runner; the test's cleanup stops it.
func Start(t testing.TB, binary string, args ...string) *Runner {
	t.Helper()
	r := &Runner{t: t, cmd: exec.Command(binary, args...), changed: make(chan struct{}), done: make(chan struct{})}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stderr = r.cmd.Stdout
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("cannot start %s: %v", binary, err)
	}
	go func() {
		scanner := bufio.NewScanner(out)
		scanner.Buffer(make([]byte, 64*1024), 1024*1024)
		for scanner.Scan() {
			r.mu.Lock()
			r.lines = append(r.lines, scanner.Text())
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
		}
		err := r.cmd.Wait()
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(r.done)
	}()
	t.Cleanup(func() {
		if err := r.Stop(30 * time.Second); err != nil {
			t.Logf("stopping bosun: %v", err)
		}
	})
	return r
}

// Output is everything printed so far, one line each.
func (r *Runner) Output() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// Count counts the lines that contain text.
func (r *Runner) Count(text string) int {
	n := 0
	for _, line := range r.Output() {
		if strings.Contains(line, text) {
			n++
		}
	}
	return n
}

// WaitFor waits until a line contains text (at most timeout); a timeout, or bosun exiting
// first, fails the test with the output so far.
func (r *Runner) WaitFor(text string, timeout time.Duration) string {
	r.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		changed := r.changed
		for _, line := range r.lines {
			if strings.Contains(line, text) {
				r.mu.Unlock()
				return line
			}
		}
		r.mu.Unlock()
		select {
		case <-changed:
		case <-r.done:
			if line, ok := r.find(text); ok {
				return line
			}
			r.t.Fatalf("bosun exited (%v) before printing %q; its output:\n%s", r.err, text, strings.Join(r.Output(), "\n"))
		case <-deadline.C:
			r.t.Fatalf("timed out after %v waiting for %q; the output:\n%s", timeout, text, strings.Join(r.Output(), "\n"))
		}
	}
}

func (r *Runner) find(text string) (string, bool) {
	for _, line := range r.Output() {
		if strings.Contains(line, text) {
			return line, true
		}
	}
	return "", false
}

// Kubeconfig is the dev cluster's kubeconfig, once bosun printed `export KUBECONFIG=…`.
func (r *Runner) Kubeconfig() string {
	for _, line := range r.Output() {
		if path, ok := strings.CutPrefix(line, "export KUBECONFIG="); ok {
			return path
		}
	}
	return ""
}

// Stop stops bosun as Ctrl-C does and waits for it to exit (at most timeout, then kills it);
// the error says how it exited when not cleanly.
func (r *Runner) Stop(timeout time.Duration) error {
	select {
	case <-r.done:
	default:
		_ = r.cmd.Process.Signal(syscall.SIGINT)
		deadline := time.NewTimer(timeout)
		defer deadline.Stop()
		select {
		case <-r.done:
		case <-deadline.C:
			_ = r.cmd.Process.Kill()
			<-r.done
			return fmt.Errorf("bosun did not stop within %v and was killed", timeout)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
