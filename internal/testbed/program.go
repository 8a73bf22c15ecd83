package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// BuildProgram builds the Go program in the package pkg (a path relative to
// the test's directory, "./examples/upstream") into bin.
func BuildProgram(pkg, bin string) error {
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// RunProgram starts the program bin with args, its environment the test's
// plus env ("KUBECONFIG=..."), and collects what it prints. When the test
// ends it stops the program as a pod is stopped (SIGTERM) and fails the test
// if the program does not exit cleanly within a minute.
func RunProgram(t testing.TB, bin string, env []string, args ...string) *Output {
	t.Helper()
	out := &Output{}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		stopping := time.Now()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("%s exited with %v; it printed:\n%s", bin, err, out)
				return
			}
			t.Logf("%s stopped %s after SIGTERM", bin, time.Since(stopping).Round(time.Millisecond))
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("%s did not stop within a minute of SIGTERM; it printed:\n%s", bin, out)
		}
	})
	return out
}
