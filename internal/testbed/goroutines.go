package testbed

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

// NumGoroutine counts the goroutines running now, except those of pooled
// connections to API servers: they belong to client-go's process-wide
// transports, which every client with the same configuration shares, and end
// on their own after the idle timeout (90 s). A leaked watch or informer
// shows in other goroutines.
func NumGoroutine() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		if !bytes.Contains(g, []byte("http2.(*ClientConn).readLoop")) && !bytes.Contains(g, []byte("net/http.(*persistConn).")) {
			count++
		}
	}
	return count
}

// WaitForGoroutines waits until at most baseline goroutines run, as counted
// by NumGoroutine, and fails the test with the stacks of every goroutine if
// they do not fall back in time.
func WaitForGoroutines(t testing.TB, baseline int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Fatalf("%d goroutines, %d before (pooled connections not counted); running:\n%s", NumGoroutine(), baseline, buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
