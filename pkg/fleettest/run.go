package fleettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// RunManager starts mgr (a Multi-Cluster Manager, or any runnable) until the
// test ends, then stops it and waits for Start to return, for a minute at
// most: goroutine leak checks then see a quiet process. An error from Start
// fails the test. The returned function stops mgr earlier; it is safe to
// call more than once.
func RunManager(t testing.TB, mgr interface{ Start(context.Context) error }) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("manager: %v", err)
				}
			case <-time.After(time.Minute):
				t.Errorf("manager did not stop within a minute")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// LogBuffer collects every line a logger writes, at every verbosity, for
// tests that check what a component logs, or that it logs no credential.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Logger returns a logger that writes into b.
func (b *LogBuffer) Logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		fmt.Fprintln(&b.buf, prefix, args)
	}, funcr.Options{Verbosity: 10})
}

// String returns everything logged so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
