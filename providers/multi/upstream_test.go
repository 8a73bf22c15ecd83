package multi

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/nop"
)

func TestChannelSizeIsRefused(t *testing.T) {
	err := New(Options{ChannelSize: 10}).Start(t.Context(), multicluster.AwareFunc(nil))
	if err == nil || !strings.Contains(err.Error(), "ChannelSize has no effect here") {
		t.Fatalf("Start with ChannelSize: %v", err)
	}
}

func TestAsRunnable(t *testing.T) {
	p := struct{ multicluster.Provider }{nop.New()} // a provider that does not run
	r := AsRunnable(p, nil)
	if r.(waiting).Provider != p {
		t.Fatal("AsRunnable does not serve the provider it was given")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx, multicluster.AwareFunc(nil)) }()
	select {
	case err := <-done:
		t.Fatalf("Start returned before its context ended: %v", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	runnable := New(Options{})
	if AsRunnable(runnable, nil) != RunnableProvider(runnable) {
		t.Fatal("AsRunnable wraps a provider that runs already")
	}
}

// AsRunnable(p, mgr) sets a ManagerSetupProvider up with mgr when it starts,
// once, and reports a failed set-up.
func TestAsRunnableSetsUpWithTheManager(t *testing.T) {
	var mgr mcmanager.Manager = struct{ mcmanager.Manager }{} // only compared
	rec := &setUpRecorder{Provider: nop.New()}
	if _, runs := any(rec).(RunnableProvider); runs {
		t.Fatal("the recorder should not run by itself")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- AsRunnable(rec, mgr).Start(ctx, multicluster.AwareFunc(nil)) }()
	fleettest.Eventually(t, 0, func() error {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.mgrs) != 1 || rec.mgrs[0] != mgr {
			return errors.New("not set up with the manager yet")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	failing := &setUpRecorder{Provider: nop.New(), err: errors.New("refused")}
	if err := AsRunnable(failing, mgr).Start(t.Context(), multicluster.AwareFunc(nil)); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("Start with a failing set-up: %v", err)
	}
}

// setUpRecorder is a ManagerSetupProvider that records its set-ups.
type setUpRecorder struct {
	multicluster.Provider
	mu   sync.Mutex
	mgrs []mcmanager.Manager
	err  error
}

func (s *setUpRecorder) SetupWithManager(_ context.Context, mgr mcmanager.Manager) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mgrs = append(s.mgrs, mgr)
	return s.err
}

// SetupWithManager sets up the inner providers present and added later,
// once each; a failed set-up refuses the provider.
func TestSetupWithManagerSetsUpInnerProviders(t *testing.T) {
	m := New(Options{})
	before, after := &setUpRecorder{Provider: nop.New()}, &setUpRecorder{Provider: nop.New()}
	if err := m.AddProvider("before", before); err != nil {
		t.Fatal(err)
	}
	mgr := fleettest.NewManager(t, fleet.Config(0), m)
	if err := m.SetupWithManager(t.Context(), mgr); err != nil {
		t.Fatal(err)
	}
	if err := m.SetupWithManager(t.Context(), mgr); err == nil {
		t.Fatal("a second SetupWithManager succeeded")
	}
	if err := m.AddProvider("after", after); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*setUpRecorder{"before": before, "after": after} {
		if len(p.mgrs) != 1 || p.mgrs[0] != mgr {
			t.Errorf("%s: set up with %v, want the manager once", name, p.mgrs)
		}
	}
	failing := &setUpRecorder{Provider: nop.New(), err: errors.New("no RBAC")}
	if err := m.AddProvider("failing", failing); err == nil || !strings.Contains(err.Error(), "no RBAC") {
		t.Fatalf("AddProvider of a provider that fails its set-up: %v", err)
	}
	if _, ok := m.GetProvider("failing"); ok {
		t.Fatal("a provider whose set-up failed was registered")
	}
}

// upstreamSetUp is a provider with upstream's SetupWithManager(mgr); wrapped
// in upstreamSetUpWithContext it also has SetupWithManagerContext(ctx, mgr),
// as the Cluster API and cluster-inventory-api providers have: the multi
// provider sets it up with the form that takes a context, else with
// upstream's.
type upstreamSetUp struct {
	multicluster.Provider
	mu         sync.Mutex
	plain, ctx int
}

func (u *upstreamSetUp) SetupWithManager(mcmanager.Manager) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.plain++
	return nil
}

type upstreamSetUpWithContext struct{ *upstreamSetUp }

func (u upstreamSetUpWithContext) SetupWithManagerContext(context.Context, mcmanager.Manager) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ctx++
	return nil
}

func TestProvidersWithUpstreamsSetupWithManagerAreSetUp(t *testing.T) {
	var mgr mcmanager.Manager = struct{ mcmanager.Manager }{} // only passed on
	plain := &upstreamSetUp{Provider: nop.New()}
	withCtx := &upstreamSetUp{Provider: nop.New()}
	for _, p := range []multicluster.Provider{struct{ *upstreamSetUp }{plain}, upstreamSetUpWithContext{withCtx}} {
		if err := setUpWith(t.Context(), p, mgr); err != nil {
			t.Fatal(err)
		}
	}
	if plain.plain != 1 || plain.ctx != 0 {
		t.Errorf("SetupWithManager(mgr) alone: called %d times, with a context %d; want once, never", plain.plain, plain.ctx)
	}
	if withCtx.ctx != 1 || withCtx.plain != 0 {
		t.Errorf("with SetupWithManagerContext: called with a context %d times, without %d; want once, never", withCtx.ctx, withCtx.plain)
	}
	// A provider that is set up with nothing is left alone.
	if err := setUpWith(t.Context(), struct{ multicluster.Provider }{nop.New()}, mgr); err != nil {
		t.Fatal(err)
	}
}
