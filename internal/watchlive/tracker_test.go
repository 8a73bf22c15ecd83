package watchlive

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestATrackerWithoutWatchesIsNeverSilent(t *testing.T) {
	var tr Tracker
	if d, watched := tr.Silence(); watched || d != 0 {
		t.Fatalf("Silence() = %s, %v; want 0, false", d, watched)
	}
	var none *Tracker
	if _, watched := none.Silence(); watched {
		t.Fatal("a nil tracker watched")
	}
	if Of(struct{}{}) != nil {
		t.Fatal("Of found a tracker on a value without one")
	}
}

// blocking is a body whose reads return what is written to it.
type blocking struct {
	ch     chan string
	closed chan struct{}
}

func (b *blocking) Read(p []byte) (int, error) {
	select {
	case s := <-b.ch:
		return copy(p, s), nil
	case <-b.closed:
		return 0, io.EOF
	}
}

func (b *blocking) Close() error { close(b.closed); return nil }

func TestSilenceRunsFromTheLastDeliveryOnAnyWatch(t *testing.T) {
	var tr Tracker
	body := &blocking{ch: make(chan string), closed: make(chan struct{})}
	w := tr.Watch(body)
	if open, seen := tr.Open(); open != 1 || seen != 1 {
		t.Fatalf("Open() = %d, %d; want 1, 1", open, seen)
	}
	got := make(chan struct{})
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := w.Read(buf); err != nil {
				close(got)
				return
			}
		}
	}()
	// The silence grows while nothing arrives...
	wait(t, func() bool { d, _ := tr.Silence(); return d >= 20*time.Millisecond })
	before, _ := tr.Silence()
	// ...and a delivery (an event, or a bookmark) ends it.
	body.ch <- `{"type":"BOOKMARK"}`
	wait(t, func() bool { d, _ := tr.Silence(); return d < before })
	// Another watch's answer is a delivery too; closing one does not end
	// the cluster's record.
	other := tr.Watch(io.NopCloser(strings.NewReader("")))
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	_ = other.Close() // counted once
	_ = w.Close()
	<-got
	if open, seen := tr.Open(); open != 0 || seen != 2 {
		t.Fatalf("Open() = %d, %d; want 0, 2", open, seen)
	}
	if _, watched := tr.Silence(); !watched {
		t.Fatal("a tracker that watched forgot it")
	}
}

func wait(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}
