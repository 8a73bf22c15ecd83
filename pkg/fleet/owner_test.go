package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/metrics"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// fenceService is an Admission with the semantics of the sharding
// coordinator's fences, whose ownership the test decides: Acquire fails while
// this replica still holds the fence (its release is pending), and a fence is
// held until released.
type fenceService struct {
	mu       sync.Mutex
	asked    int
	owns     map[string]bool // absent: owned
	changed  chan struct{}
	held     map[string]context.CancelCauseFunc
	acquires map[string]int
	released map[string]time.Time
	block    chan struct{} // non-nil: Acquire waits until it is closed
	// abandoned counts the Acquire calls whose context ended while they
	// waited for block.
	abandoned int
}

func newFenceService() *fenceService {
	return &fenceService{owns: map[string]bool{}, changed: make(chan struct{}), held: map[string]context.CancelCauseFunc{},
		acquires: map[string]int{}, released: map[string]time.Time{}}
}

func (f *fenceService) Owns(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	owns, set := f.owns[name]
	return owns || !set
}

func (f *fenceService) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fenceService) setOwns(name string, owns bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.owns[name] = owns
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fenceService) Acquire(ctx context.Context, name string) (context.Context, func(), error) {
	f.mu.Lock()
	f.asked++
	block := f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			f.mu.Lock()
			f.abandoned++
			f.mu.Unlock()
			return nil, nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.held[name]; ok {
		return nil, nil, fmt.Errorf("cluster %q: fence already held by this replica", name)
	}
	fenced, cancel := context.WithCancelCause(context.Background())
	f.held[name] = cancel
	f.acquires[name]++
	var once sync.Once
	return fenced, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(f.held, name)
			f.released[name] = time.Now()
			cancel(errors.New("released"))
		})
	}, nil
}

func (f *fenceService) holds(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.held[name]
	return ok
}

func (f *fenceService) acquired(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acquires[name]
}

func (f *fenceService) releasedAt(name string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.released[name]
	return at, ok
}

// holder is a subscriber that holds, per name, the cluster of its live
// engagement: an engagement that ends lets go only of itself, never of a
// newer one of the same cluster.
type holder struct {
	// slow, if set, is how long each engagement takes (a controller's
	// watches syncing on a large cluster): set before the holder subscribes.
	slow func() time.Duration

	mu   sync.Mutex
	held map[multicluster.ClusterName]engagedAs
	n    map[multicluster.ClusterName]int
}

type engagedAs struct {
	cl  cluster.Cluster
	ctx context.Context
}

func newHolder() *holder {
	return &holder{held: map[multicluster.ClusterName]engagedAs{}, n: map[multicluster.ClusterName]int{}}
}

func (h *holder) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if ctx.Err() != nil {
		return fmt.Errorf("cluster %q: engagement context already done", name)
	}
	if r, ok := cl.(interface{ refuseEngagement() bool }); ok && r.refuseEngagement() {
		return fmt.Errorf("cluster %q: engagement refused by the test", name)
	}
	if h.slow != nil {
		select {
		case <-time.After(h.slow()):
		case <-ctx.Done():
			return fmt.Errorf("cluster %q: engagement context ended while engaging: %w", name, ctx.Err())
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[name] = engagedAs{cl, ctx}
	h.n[name]++
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.held[name].ctx == ctx {
			delete(h.held, name)
		}
	})
	return nil
}

// engagement returns the context name is held with now, nil if none.
func (h *holder) engagement(name multicluster.ClusterName) context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[name].ctx
}

// Engaged returns the clusters held now, by name.
func (h *holder) Engaged() map[multicluster.ClusterName]cluster.Cluster {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[multicluster.ClusterName]cluster.Cluster{}
	for name, e := range h.held {
		out[name] = e.cl
	}
	return out
}

// startEngine runs an engine with a holder subscribed until the test ends,
// with short backoffs and without probes.
func startEngine(t *testing.T, opts fleet.Options) (*fleet.Engine, *holder) {
	t.Helper()
	opts.MinBackoff, opts.MaxBackoff = 50*time.Millisecond, 200*time.Millisecond
	opts.Health.Disabled = true
	if testing.Verbose() && opts.Logger.GetSink() == nil {
		// Under -v, the engine's lines go to the test's log, unless the test
		// reads them itself (TestRemovingAHandedClusterIsNoError did not find
		// its lines under -v).
		opts.Logger = testr.New(t)
	}
	tr := newHolder()
	return serveEngine(t, opts, tr), tr
}

// serveEngine runs an engine with opts as they are, sub subscribed, until
// the test ends.
func serveEngine(t *testing.T, opts fleet.Options, sub multicluster.Aware) *fleet.Engine {
	t.Helper()
	e := fleet.New(opts)
	e.Subscribe(sub)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// runningEngine is startEngine, returning once the engine runs: Engage
// before that only records the cluster as wanted, so tests that check what
// Engage did need it. (It asks for readiness, which then stays passed: tests
// of readiness use startEngine.)
func runningEngine(t *testing.T, opts fleet.Options) (*fleet.Engine, *holder) {
	t.Helper()
	e, tr := startEngine(t, opts)
	fleettest.Eventually(t, 0, func() error { return e.Ready(nil) })
	return e, tr
}

func engagedWith(tr *holder, name multicluster.ClusterName, cl cluster.Cluster) func() error {
	return func() error {
		if got := tr.Engaged()[name]; got != cl {
			return fmt.Errorf("%s engaged with %p, want %p", name, got, cl)
		}
		return nil
	}
}

func notEngaged(tr *holder, name multicluster.ClusterName) func() error {
	return func() error {
		if got, ok := tr.Engaged()[name]; ok {
			return fmt.Errorf("%s still engaged with %p", name, got)
		}
		return nil
	}
}

// Defect 1: an adopted cluster is fenced like a published member, and handed
// off when ownership moves: the old replica lets go of it before its fence is
// released, and takes it back when it owns it again.
func TestAdoptedClusterIsFencedAndHandedOff(t *testing.T) {
	fences := newFenceService()
	e, tr := runningEngine(t, fleet.Options{Admission: fences})
	cl := running(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.Engage(ctx, "adopted", cl); err != nil {
		t.Fatal(err)
	}
	if !fences.holds("adopted") {
		t.Fatal("an adopted cluster was engaged without its fence")
	}
	fleettest.Eventually(t, 0, engagedWith(tr, "adopted", cl))

	fences.setOwns("adopted", false)
	fleettest.Eventually(t, 0, notEngaged(tr, "adopted"))
	fleettest.Eventually(t, 0, func() error {
		if fences.holds("adopted") {
			return errors.New("fence of a cluster owned elsewhere still held")
		}
		return nil
	})

	fences.setOwns("adopted", true)
	fleettest.Eventually(t, 0, engagedWith(tr, "adopted", cl))
	if !fences.holds("adopted") {
		t.Fatal("an adopted cluster was engaged again without its fence")
	}
}

// Defect 1: under sharding, Engage of a cluster owned elsewhere neither runs
// it here nor errs: it is engaged here once this replica owns it.
func TestAdoptedClusterOwnedElsewhereWaits(t *testing.T) {
	fences := newFenceService()
	fences.owns["elsewhere"] = false
	e, tr := runningEngine(t, fleet.Options{Admission: fences})
	cl := running(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.Engage(ctx, "elsewhere", cl); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Engaged()["elsewhere"]; ok || fences.acquired("elsewhere") != 0 {
		t.Fatal("a cluster owned by another replica was engaged or fenced here")
	}
	fences.setOwns("elsewhere", true)
	fleettest.Eventually(t, 0, engagedWith(tr, "elsewhere", cl))
}

// flipOnLook is a fence service whose ownership of one cluster changes to
// owned right after the engine first asks about it.
type flipOnLook struct {
	*fenceService
	name string
	once sync.Once
}

func (f *flipOnLook) Owns(name string) bool {
	owns := f.fenceService.Owns(name)
	if name == f.name {
		f.once.Do(func() { f.setOwns(name, true) })
	}
	return owns
}

// An ownership change right after Start looked at a cluster is not lost:
// Start takes the admission's change signal before it looks, so the change
// is seen. (Taken after, the cluster waited in StateWanted until the next
// change of the ring, which may never come.)
func TestOwnershipChangeWhileStartingIsNotLost(t *testing.T) {
	fences := &flipOnLook{fenceService: newFenceService(), name: "late"}
	fences.owns["late"] = false
	e := fleet.New(fleet.Options{Admission: fences, Health: fleet.HealthOptions{Disabled: true}})
	tr := newHolder()
	e.Subscribe(tr)
	cl := running(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Before Start, Engage only records the cluster as wanted: Start is the
	// first to ask whether this replica owns it.
	if err := e.Engage(ctx, "late", cl); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Start(ctx) }()
	defer func() { cancel(); <-done }()
	fleettest.Eventually(t, 0, engagedWith(tr, "late", cl))
}

// Defect 2: a member removed and published again at once (a recreated
// Secret) is engaged again: its fence is acquired once the previous release
// has gone through.
func TestRepublishedMemberIsEngagedAgain(t *testing.T) {
	fences := newFenceService()
	e, tr := runningEngine(t, fleet.Options{Admission: fences})
	member := func(i int) fleet.Member {
		cfg := members.Config(1)
		return fleet.Member{Name: "recreated", Hash: fmt.Sprint(i), Build: func(context.Context) (cluster.Cluster, error) {
			return cluster.New(cfg)
		}}
	}
	e.SetMember(member(1))
	fleettest.Eventually(t, time.Minute, func() error {
		if _, ok := tr.Engaged()["recreated"]; !ok {
			return errors.New("not engaged")
		}
		return nil
	})
	for i := 2; i < 5; i++ {
		e.RemoveMember("recreated")
		e.SetMember(member(i))
		fleettest.Eventually(t, time.Minute, func() error {
			if s, _ := e.State("recreated"); s != fleet.StateEngaged {
				return fmt.Errorf("round %d: recreated is %s", i, s)
			}
			return nil
		})
	}
}

// Defect 3: two Engage calls of one instance, concurrent, both succeed.
func TestConcurrentEngageOfOneInstance(t *testing.T) {
	e, tr := runningEngine(t, fleet.Options{})
	cl := running(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for round := range 10 {
		name := fmt.Sprintf("twice-%d", round)
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- e.Engage(ctx, name, cl) }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		fleettest.Eventually(t, 0, engagedWith(tr, name, cl))
	}
}

// Defect 3: cancelling an adopted cluster's context and at once engaging a
// replacement succeeds, and the replacement stays engaged.
func TestReplaceAfterCancel(t *testing.T) {
	e, tr := runningEngine(t, fleet.Options{})
	a, b := running(t, 1), running(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Engage(ctx, "churn", a); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		next := b
		if i%2 == 1 {
			next = a
		}
		cancel()
		ctx, cancel = context.WithCancel(context.Background())
		if err := e.Engage(ctx, "churn", next); err != nil {
			t.Fatalf("replacement %d: %v", i, err)
		}
		fleettest.Eventually(t, 5*time.Second, func() error {
			err := engagedWith(tr, "churn", next)()
			if err != nil {
				return fmt.Errorf("%w (step %d, %v)", err, i, e.Clusters())
			}
			return nil
		})
	}
	cancel()
	fleettest.Eventually(t, 0, notEngaged(tr, "churn"))
}

// Defect 5: a fence is released only once the reconciles in flight against
// its cluster have returned; one that outlives the drain timeout is released
// after it.
func TestFenceWaitsForReconcilesInFlight(t *testing.T) {
	fences := newFenceService()
	e, tr := runningEngine(t, fleet.Options{Admission: fences, DrainTimeout: 10 * time.Second})
	cl := running(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.Engage(ctx, "drained", cl); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 0, engagedWith(tr, "drained", cl))
	engaged, done, ok := e.Hold(context.Background(), "drained")
	if !ok {
		t.Fatal("Hold of an engaged cluster failed")
	}
	fences.setOwns("drained", false)
	<-engaged.Done() // the reconcile is told to stop
	fleettest.Consistently(t, 300*time.Millisecond, func() error {
		if _, released := fences.releasedAt("drained"); released {
			return errors.New("fence released while a reconcile was in flight")
		}
		return nil
	})
	returned := time.Now()
	done()
	fleettest.Eventually(t, 0, func() error {
		at, ok := fences.releasedAt("drained")
		if !ok {
			return errors.New("fence not released after the reconcile returned")
		}
		if at.Before(returned) {
			return fmt.Errorf("fence released %s before the reconcile returned", returned.Sub(at))
		}
		return nil
	})

	// Bounded: a reconcile that never returns holds the fence for the drain
	// timeout only, and the overrun is counted.
	fences2 := newFenceService()
	e2, tr2 := runningEngine(t, fleet.Options{Admission: fences2, DrainTimeout: 200 * time.Millisecond})
	if err := e2.Engage(ctx, "stuck", cl); err != nil {
		t.Fatal(err)
	}
	fleettest.Eventually(t, 0, engagedWith(tr2, "stuck", cl))
	_, stuck, ok := e2.Hold(context.Background(), "stuck")
	if !ok {
		t.Fatal("Hold of an engaged cluster failed")
	}
	defer stuck()
	overruns := testutil.ToFloat64(metrics.DrainOverruns)
	fences2.setOwns("stuck", false)
	fleettest.Eventually(t, 0, func() error {
		if _, ok := fences2.releasedAt("stuck"); !ok {
			return errors.New("fence held beyond the drain timeout")
		}
		if got := testutil.ToFloat64(metrics.DrainOverruns); got != overruns+1 {
			return fmt.Errorf("drain overruns %v, want %v", got, overruns+1)
		}
		return nil
	})
}

// Defect 6: readiness waits for the clusters this replica owns while their
// fences are held elsewhere.
func TestReadinessWaitsForOwnedClustersFences(t *testing.T) {
	fences := newFenceService()
	fences.block = make(chan struct{})
	e, _ := startEngine(t, fleet.Options{Admission: fences})
	e.SetMember(fleet.Member{Name: "waits", Hash: "1", Build: func(context.Context) (cluster.Cluster, error) {
		return cluster.New(members.Config(1))
	}})
	fleettest.Eventually(t, 0, func() error {
		fences.mu.Lock()
		defer fences.mu.Unlock()
		if fences.asked == 0 {
			return errors.New("the engine has not asked for the fence yet")
		}
		return nil
	})
	if err := e.Ready(nil); err == nil {
		t.Fatal("ready while an owned cluster waits for its fence")
	}
	close(fences.block)
	fleettest.Eventually(t, time.Minute, func() error { return e.Ready(nil) })
}
