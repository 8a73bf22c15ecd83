package testbed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Fences is a fleet.Admission whose ownership the test decides, with the
// semantics of the sharding coordinator's fences: every name is owned until
// SetOwns says otherwise, Acquire fails while the fence is held (its
// release is pending), and a held fence ends when released or lost (Lose,
// as a renewal lapse ends it).
type Fences struct {
	mu      sync.Mutex
	owns    map[string]bool // absent: owned
	changed chan struct{}
	held    map[string]*context.CancelCauseFunc
	block   chan struct{} // non-nil: Acquire waits until it is closed
}

// NewFences returns fences that own every name.
func NewFences() *Fences {
	return &Fences{owns: map[string]bool{}, changed: make(chan struct{}), held: map[string]*context.CancelCauseFunc{}}
}

// Owns reports whether this replica owns name.
func (f *Fences) Owns(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	owns, set := f.owns[name]
	return owns || !set
}

// Changed is closed when an answer of Owns changes.
func (f *Fences) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// SetOwns hands name to this replica, or away from it.
func (f *Fences) SetOwns(name string, owns bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.owns[name] = owns
	close(f.changed)
	f.changed = make(chan struct{})
}

// Block makes Acquire wait, as a fence still held by a peer makes it, until
// unblock is called (or its ctx ends).
func (f *Fences) Block() (unblock func()) {
	block := make(chan struct{})
	f.mu.Lock()
	f.block = block
	f.mu.Unlock()
	return sync.OnceFunc(func() {
		f.mu.Lock()
		f.block = nil
		f.mu.Unlock()
		close(block)
	})
}

// Acquire takes name's fence, or fails if it is held.
func (f *Fences) Acquire(ctx context.Context, name string) (context.Context, func(), error) {
	f.mu.Lock()
	if block := f.block; block != nil {
		f.mu.Unlock()
		select {
		case <-block:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	if _, ok := f.held[name]; ok {
		return nil, nil, fmt.Errorf("cluster %q: fence already held by this replica", name)
	}
	fenced, cancel := context.WithCancelCause(context.Background())
	held := &cancel
	f.held[name] = held
	return fenced, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.held[name] == held {
			delete(f.held, name)
		}
		cancel(errors.New("released"))
	}, nil
}

// Holds reports whether name's fence is held.
func (f *Fences) Holds(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.held[name]
	return ok
}

// Lose ends name's fence as a renewal lapse would: the holder must let go
// of the cluster and release the fence before it can be taken again.
func (f *Fences) Lose(name string) {
	f.mu.Lock()
	held := f.held[name]
	f.mu.Unlock()
	if held != nil {
		(*held)(errors.New("lost: renewal lapsed"))
	}
}

// LeaveAndComeBack hands name, engaged on e, to another replica and back,
// then loses its fence as a renewal lapse does, and checks after each that
// name is engaged here again and that get answers it (GetCluster, or a
// provider's Get): every member, whatever its kind, is engaged again when
// it comes back to a replica.
func LeaveAndComeBack(t testing.TB, e *fleet.Engine, f *Fences, name multicluster.ClusterName, get func(multicluster.ClusterName) error) {
	t.Helper()
	// engagedAgain: engaged, after a change of state since before.
	engagedAgain := func(before <-chan struct{}) func() error {
		return func() error {
			s, _ := e.Snapshot(name)
			select {
			case <-before:
			default:
				return fmt.Errorf("%s is still %s: it has not left", name, s.State)
			}
			if _, err := e.Get(name); err != nil {
				return fmt.Errorf("%s is %s, want engaged again: %w", name, s.State, err)
			}
			if err := get(name); err != nil {
				return fmt.Errorf("%s engaged, but Get: %w", name, err)
			}
			return nil
		}
	}
	fleettest.Eventually(t, 30*time.Second, func() error {
		_, err := e.Get(name)
		return err
	})

	engaged, _ := e.Snapshot(name)
	f.SetOwns(string(name), false) // handed to another replica
	fleettest.Eventually(t, 30*time.Second, func() error {
		if s, _ := e.Snapshot(name); s.State != fleet.StateWanted || f.Holds(string(name)) {
			return fmt.Errorf("%s is %s (fence held: %v), want it let go of", name, s.State, f.Holds(string(name)))
		}
		return nil
	})
	f.SetOwns(string(name), true) // and back
	fleettest.Eventually(t, 30*time.Second, engagedAgain(engaged.Changed))

	engaged, _ = e.Snapshot(name)
	f.Lose(string(name))
	fleettest.Eventually(t, 30*time.Second, engagedAgain(engaged.Changed))
}
