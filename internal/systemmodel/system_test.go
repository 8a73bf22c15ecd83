package systemmodel_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/mcruntime/multicluster-runtime/internal/fleetpeek"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var (
	flagSeed  = flag.Uint64("systemmodel.seed", 0, "run the whole-system checker with this seed only")
	flagSteps = flag.Int("systemmodel.steps", 0, "steps of each schedule (default 120, 1000 with -systemmodel.soak)")
	flagSoak  = flag.Bool("systemmodel.soak", false, "run the whole-system checker for many seeds and long schedules")
	flagGate  = flag.String("systemmodel.gate", "", "comma-separated invariants not to report (see knownDefects), to look past one defect at the next")
)

// knownDefects are invariants whose violations the checker knows of and
// does not report yet: each names a defect not fixed yet. Empty once every
// defect the checker finds is fixed. The invariants: "fence" (no fence
// taken while owned elsewhere), "engage" (no engagement on a replica the
// cluster was handed away from), "outcome" (Add returns its own outcome),
// "add-returns" (every Add returns, at once when owned elsewhere).
var knownDefects = map[string]bool{}

func TestSystem(t *testing.T) {
	for _, invariant := range strings.Split(*flagGate, ",") {
		if invariant != "" {
			knownDefects[invariant] = true
		}
	}
	seeds, steps := uint64(8), 120
	if *flagSoak {
		seeds, steps = 100, 1000
	}
	if *flagSteps > 0 {
		steps = *flagSteps
	}
	if *flagSeed != 0 {
		runSystem(t, *flagSeed, steps, replicasOf(*flagSeed))
		return
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		if !runSystem(t, seed, steps, replicasOf(seed)) {
			return
		}
	}
}

// replicasOf is the number of replicas of a seed: 2 or 3.
func replicasOf(seed uint64) int { return 2 + int(seed%2) }

// Bounds of the checker.
const (
	// quietBound is how long after the schedule goes quiet (every server
	// answers, no fence blocked, no outage) the invariants must hold.
	quietBound = 15 * time.Second
	// grace is how long after an ownership change a replica may still take
	// the fence or engage the cluster: the change's step in flight must be
	// superseded well within it.
	grace = time.Second
	// quietEvery is the number of steps between quiet periods.
	quietEvery = 40
)

// member is a cluster of the fleet, as the model knows it.
type member struct {
	name       multicluster.ClusterName // as its provider names it
	engineName multicluster.ClusterName // as the engines name it
	kind       kind
	broken     bool // its clusters never start
	host       string
	syncDelay  time.Duration
	on         []*placement // by replica
	removed    bool
}

// placement is a member on one replica.
type placement struct {
	wanted bool               // the application or the provider wants it there
	cl     *fakeCluster       // the cluster lent on this replica (kinds that add)
	cancel context.CancelFunc // ends the Add's ctx: the member is removed
	call   *addCall           // the last Add, if the kind adds
}

// addCall is one Add of the application, and what came of it.
type addCall struct {
	replica int
	began   time.Time
	gen     int // the ownership generation of the name when Add was called
	done    chan struct{}
	err     error
	removed bool // the member was removed while Add ran (under world.mu)
}

// world is one run of the checker: the replicas, the members and the
// schedule.
type world struct {
	t      *testing.T
	seed   uint64
	rng    *rand.Rand
	srv    *servers
	fences *fenceService
	v      *violations
	log    logr.Logger
	logs   *ring

	replicas []*replica

	mu      sync.Mutex
	members []*member
	byName  map[multicluster.ClusterName]*member // by engine name
	kept    []*fakeCluster                       // every cluster made, to check that none runs at the end
	subs    int

	step     int
	schedule []string
	outages  []bool

	// probesOff: the engines' probing is disabled (HealthOptions.Disabled)
	// in this schedule (probesOffOf).
	probesOff bool
}

// probesOffOf reports whether the engines of a seed probe nothing: one seed
// in four.
func probesOffOf(seed uint64) bool { return seed%4 == 3 }

func (w *world) keep(cl *fakeCluster) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kept = append(w.kept, cl)
}

// ring keeps the last lines of the engines' logs, for a failing seed.
type ring struct {
	mu    sync.Mutex
	lines []string
	next  int
}

func (r *ring) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < 300 {
		r.lines = append(r.lines, line)
		return
	}
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(append(append([]string(nil), r.lines[r.next:]...), r.lines[:r.next]...), "\n")
}

// runSystem runs one seed; it reports whether it passed.
func runSystem(t *testing.T, seed uint64, steps, replicas int) bool {
	w := &world{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed*7919)), srv: &servers{by: map[string]answer{}, slow: 90 * time.Millisecond},
		v: &violations{}, logs: &ring{}, byName: map[multicluster.ClusterName]*member{}, outages: make([]bool, replicas)}
	w.fences = newFenceService(replicas, grace, w.v)
	w.probesOff = probesOffOf(seed)
	w.log = funcr.New(func(prefix, args string) { w.logs.add(time.Now().Format("15:04:05.000") + " " + prefix + " " + args) }, funcr.Options{Verbosity: 1})

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range replicas {
		w.replicas = append(w.replicas, w.startReplica(ctx, i, &wg))
	}
	failed := ""
	for w.step = 1; w.step <= steps && failed == ""; w.step++ {
		w.act()
		time.Sleep(time.Duration(w.rng.IntN(15)) * time.Millisecond)
		if w.v.any() {
			failed = w.v.String()
			break
		}
		if w.step%quietEvery == 0 {
			if failed = w.quiet(); failed != "" {
				break // at this step
			}
		}
	}
	if failed == "" && steps%quietEvery != 0 {
		failed = w.quiet()
	}
	if failed == "" {
		failed = w.removeAll()
	}
	cancel()
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		if failed == "" {
			failed = "the replicas did not stop within 30s of their context's end"
		}
	}
	if failed == "" {
		for _, cl := range w.kept {
			if cl.running.Load() {
				failed = fmt.Sprintf("cluster %s still runs after every replica stopped", cl)
				break
			}
		}
	}
	if failed == "" && w.v.any() {
		failed = w.v.String()
	}
	if failed == "" {
		if len(w.v.gated) > 0 {
			t.Logf("seed %d: %d steps passed; known defects seen (not reported): %v", seed, steps, w.v.gated)
		}
		return true
	}
	last := w.schedule
	if len(last) > 60 {
		last = last[len(last)-60:]
	}
	t.Errorf("seed %d (%d replicas, probes off %v), step %d of %d: %s\n\nthe schedule's last steps:\n%s\n\nthe engines' last log lines:\n%s\n\nrerun it alone: go test -race -count=1 -run 'TestSystem$' ./internal/systemmodel/ -systemmodel.seed=%d -systemmodel.steps=%d",
		seed, replicas, w.probesOff, w.step, steps, failed, strings.Join(last, "\n"), w.logs, seed, steps)
	return false
}

func (w *world) note(format string, args ...any) {
	w.schedule = append(w.schedule, fmt.Sprintf("%4d ", w.step)+fmt.Sprintf(format, args...))
}

// act takes one step of the schedule.
func (w *world) act() {
	n := w.rng.IntN(100)
	live := w.liveMembers()
	switch {
	case n < 25 || len(live) == 0:
		w.addMember()
	case n < 33:
		w.removeMember(live[w.rng.IntN(len(live))])
	case n < 50:
		m := live[w.rng.IntN(len(live))]
		if m.kind == kindAware {
			return // not sharded: the application's own Aware runs it on every replica
		}
		owner, _ := w.fences.ownerOf(m.engineName)
		to := (owner + 1 + w.rng.IntN(len(w.replicas)-1)) % len(w.replicas)
		w.note("hand %s from replica %d to %d", m.engineName, owner, to)
		w.fences.setOwner(m.engineName, to)
	case n < 57:
		m := live[w.rng.IntN(len(live))]
		w.note("renewal of %s's fence lapses", m.engineName)
		w.fences.lose(m.engineName)
	case n < 60:
		r := w.rng.IntN(len(w.replicas))
		w.outages[r] = !w.outages[r]
		w.note("host outage of replica %d: %v", r, w.outages[r])
		w.fences.outage(r, w.outages[r])
	case n < 65:
		b := w.rng.IntN(2) == 0
		w.note("fence Acquire blocked: %v", b)
		w.fences.setBlocked(b)
	case n < 77:
		m := live[w.rng.IntN(len(live))]
		a := answer(w.rng.IntN(4))
		w.note("server of %s (%s) answers %s", m.engineName, m.host, a)
		w.srv.set(m.host, a)
	case n < 82:
		m := live[w.rng.IntN(len(live))]
		if m.kind == kindAware {
			return
		}
		paused := w.rng.IntN(2) == 0
		w.note("%s paused: %v", m.engineName, paused)
		for _, r := range w.replicas {
			r.e.SetPaused(m.engineName, paused)
		}
	case n < 92:
		k := kind(w.rng.IntN(int(numKinds)))
		field := fmt.Sprintf("field-%d", w.step)
		w.note("index %s registered with the %s providers", field, k)
		for _, r := range w.replicas {
			if err := r.index(context.Background(), k, field); err != nil {
				w.v.add("index", "replica %d: registering %s with the %s provider: %v", r.i, field, k, err)
			}
		}
	case n < 95:
		if w.subs >= 3 {
			return
		}
		w.subs++
		r := w.replicas[w.rng.IntN(len(w.replicas))]
		w.note("a runnable subscribes late on replica %d", r.i)
		check := func(name multicluster.ClusterName) { w.checkEngagedHere(r.i, name) }
		r.subscribe(newTracker(check))
	default:
		// Nothing: time passes.
	}
}

func (w *world) liveMembers() []*member {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*member
	for _, m := range w.members {
		if !m.removed {
			out = append(out, m)
		}
	}
	return out
}

// addMember makes a new member of a random kind, on every replica.
func (w *world) addMember() {
	k := kind(w.rng.IntN(int(numKinds)))
	id := len(w.members)
	name := multicluster.ClusterName(fmt.Sprintf("%s-%d", k, id))
	m := &member{name: name, engineName: name, kind: k, host: fmt.Sprintf("server-%d", id)}
	switch k {
	case kindMulti:
		m.engineName = "m#" + name
	case kindNS:
		m.host = "" // its server is the shared cluster's, one per replica
	}
	if k != kindNS && w.rng.IntN(5) == 0 {
		m.broken = true
	}
	if w.rng.IntN(6) == 0 {
		m.syncDelay = time.Duration(300+w.rng.IntN(1200)) * time.Millisecond
	} else {
		m.syncDelay = time.Duration(w.rng.IntN(40)) * time.Millisecond
	}
	w.note("add %s (kind %s, broken %v, sync %s)", m.engineName, k, m.broken, m.syncDelay)
	w.mu.Lock()
	w.members = append(w.members, m)
	w.byName[m.engineName] = m
	for range w.replicas {
		m.on = append(m.on, &placement{wanted: true})
	}
	w.mu.Unlock()
	for _, r := range w.replicas {
		if !k.adds() {
			r.publish(w, m)
			continue
		}
		p := m.on[r.i]
		p.cl = &fakeCluster{name: name, host: m.host, srv: w.srv, broken: m.broken, syncDelay: m.syncDelay}
		w.keep(p.cl)
		ctx, cancel := context.WithCancel(context.Background())
		p.cancel = cancel
		_, gen := w.fences.ownerOf(m.engineName)
		call := &addCall{replica: r.i, began: time.Now(), gen: gen, done: make(chan struct{})}
		p.call = call
		go func() {
			err := r.add(ctx, m, p.cl)
			w.added(m, p, call, err)
		}()
	}
}

// added checks what an Add returned: its own outcome, or at once nil when
// the cluster is owned elsewhere.
func (w *world) added(m *member, p *placement, call *addCall, err error) {
	owner, gen := w.fences.ownerOf(m.engineName)
	w.mu.Lock()
	defer w.mu.Unlock()
	call.err = err
	defer close(call.done)
	if call.removed {
		return
	}
	switch {
	case err == nil && m.broken && (m.kind == kindAware || (owner == call.replica && gen == call.gen)):
		w.v.add("outcome", "Add of %s on replica %d returned nil after %s, but its cluster cannot start and replica %d owned it throughout: Add must return the outcome of its own publication",
			m.engineName, call.replica, time.Since(call.began).Round(time.Millisecond), owner)
	case err != nil && !m.broken:
		w.v.add("outcome", "Add of the healthy cluster %s on replica %d failed after %s (owner %d): %v",
			m.engineName, call.replica, time.Since(call.began).Round(time.Millisecond), owner, err)
	}
	if err != nil {
		p.wanted = false // the application did not add it
	}
}

// removeMember removes m from every replica.
func (w *world) removeMember(m *member) {
	w.note("remove %s", m.engineName)
	w.mu.Lock()
	m.removed = true
	for _, p := range m.on {
		p.wanted = false
		if p.call != nil {
			p.call.removed = true
		}
	}
	w.mu.Unlock()
	for _, r := range w.replicas {
		r.remove(m)
		if p := m.on[r.i]; p.cancel != nil {
			p.cancel()
		}
	}
}

// checkEngagedHere is called by every subscriber of replica r as it is
// engaged with name: r must own name, or have been told otherwise less
// than grace ago.
func (w *world) checkEngagedHere(r int, name multicluster.ClusterName) {
	w.fences.mu.Lock()
	owner := w.fences.ownerLocked(name)
	since := time.Since(w.fences.flipped[name])
	w.fences.mu.Unlock()
	if owner != r && since > grace {
		w.v.add("engage", "replica %d engaged %s, owned by replica %d since %s ago: the start in flight was not let go when it was handed away",
			r, name, owner, since.Round(time.Millisecond))
	}
}

// quiet heals the world (every server answers, no fence is blocked, no
// host is out) and waits, within quietBound, for every invariant to hold.
func (w *world) quiet() string {
	w.note("quiet: every server answers, fences unblocked, hosts back")
	w.srv.healAll()
	w.fences.heal()
	clear(w.outages)
	began := time.Now()
	deadline := began.Add(quietBound)
	for {
		err := w.invariants()
		if err == nil {
			if testing.Verbose() {
				w.t.Logf("seed %d, step %d: quiet within %s", w.seed, w.step, time.Since(began).Round(time.Millisecond))
			}
			return ""
		}
		if w.v.any() {
			return w.v.String()
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("after %s of quiet: %v", quietBound, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// invariants checks, once, what must hold once the world is quiet.
func (w *world) invariants() error {
	w.mu.Lock()
	members := append([]*member(nil), w.members...)
	w.mu.Unlock()
	held := w.fences.held()
	var errs []error
	for _, m := range members {
		owner, _ := w.fences.ownerOf(m.engineName)
		for _, r := range w.replicas {
			w.mu.Lock()
			p := *m.on[r.i]
			var pending *addCall
			if p.call != nil && !p.call.removed && !isDone(p.call.done) {
				pending = p.call
			}
			w.mu.Unlock()
			if pending != nil && !knownDefects["add-returns"] {
				errs = append(errs, fmt.Errorf("Add of %s on replica %d (owner %d) has not returned after %s", m.engineName, r.i, owner, time.Since(pending.began).Round(time.Millisecond)))
				continue
			}
			if err := w.placed(r, m, p, owner, held); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if w.probesOff {
		// Nothing takes an entry from the probe queue: none may be put in
		// (each would hold its record, removed or not, for the engine's life).
		for _, r := range w.replicas {
			if n := fleetpeek.ProbeEntries(r.e); n > 0 {
				errs = append(errs, fmt.Errorf("the probe queue of replica %d holds %d entries, probing disabled", r.i, n))
			}
		}
	}
	for name, r := range held {
		if owner, _ := w.fences.ownerOf(name); owner != r {
			errs = append(errs, fmt.Errorf("replica %d holds the fence of %s, owned by replica %d", r, name, owner))
		}
	}
	if len(errs) > 3 {
		errs = append(errs[:3], fmt.Errorf("and %d more", len(errs)-3))
	}
	return errors.Join(errs...)
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// placed checks member m on replica r, the world quiet.
func (w *world) placed(r *replica, m *member, p placement, owner int, held map[string]int) error {
	name := m.engineName
	if m.kind == kindAware {
		// Not the engine's: Clusters[T] engages it with its Aware, on every
		// replica that added it.
		cl, engaged := r.awareTr.holds(name)
		got, err := r.aware.Get(context.Background(), name)
		switch {
		case !p.wanted && (engaged || err == nil):
			return fmt.Errorf("%s, removed, is still engaged with replica %d's own Aware", name, r.i)
		case p.wanted && !m.broken && (!engaged || err != nil || got != cl):
			return fmt.Errorf("%s is not engaged with replica %d's own Aware (engaged %v, Get: %v)", name, r.i, engaged, err)
		case p.wanted && !m.broken:
			return indexedWith(r, m, cl)
		}
		return nil
	}
	state, known := r.e.State(name)
	holder, fenced := held[name]
	here := fenced && holder == r.i
	switch {
	case !p.wanted:
		if known {
			return fmt.Errorf("%s is %s on replica %d, which does not want it any more", name, state, r.i)
		}
		if here {
			return fmt.Errorf("replica %d holds the fence of %s, which it does not want any more", r.i, name)
		}
		for _, tr := range r.subscribers() {
			if _, ok := tr.holds(name); ok {
				return fmt.Errorf("a subscriber of replica %d still holds %s, which it does not want any more", r.i, name)
			}
		}
		return nil
	case owner != r.i:
		if state != fleet.StateWanted {
			return fmt.Errorf("%s is %s on replica %d, which does not own it (replica %d does)", name, state, r.i, owner)
		}
		if here {
			return fmt.Errorf("replica %d holds the fence of %s, owned by replica %d", r.i, name, owner)
		}
		return nil
	case m.broken:
		return nil // never answers: nothing to engage
	}
	cl, err := r.e.Get(name)
	if err != nil {
		return fmt.Errorf("%s, wanted by and owned by replica %d, and answering, is not engaged there: %w", name, r.i, err)
	}
	for j, tr := range r.subscribers() {
		if got, ok := tr.holds(name); !ok || got != cl {
			return fmt.Errorf("%s is engaged on replica %d, but its subscriber %d does not hold it (holds %v)", name, r.i, j, got)
		}
	}
	if got, err := r.providerGet(m); err != nil || got != cl {
		return fmt.Errorf("%s is engaged on replica %d, but its %s provider's Get answers %v, %v", name, r.i, m.kind, got, err)
	}
	return indexedWith(r, m, cl)
}

// indexedWith checks that cl has every index registered with its
// provider on r.
func indexedWith(r *replica, m *member, cl any) error {
	if !m.kind.indexed() {
		return nil
	}
	f, ok := cl.(*fakeCluster)
	if !ok {
		return fmt.Errorf("%s on replica %d is engaged with a %T, not the cluster its provider made", m.engineName, r.i, cl)
	}
	if p := m.on[r.i]; p.cl != nil && p.cl != f {
		return fmt.Errorf("%s on replica %d is engaged with %s, not the cluster lent (%s)", m.engineName, r.i, f, p.cl)
	}
	if missing := f.missing(r.indexes[m.kind]); len(missing) > 0 {
		return fmt.Errorf("%s, engaged on replica %d, lacks the indexes %v registered with its %s provider", m.engineName, r.i, missing, m.kind)
	}
	return nil
}

// removeAll removes every member and checks that nothing of them remains:
// no record, no fence, no subscriber holding one, no cluster running.
func (w *world) removeAll() string {
	for _, m := range w.liveMembers() {
		w.removeMember(m)
	}
	deadline := time.Now().Add(quietBound)
	for {
		err := w.invariants()
		if err == nil {
			err = w.nothingRuns()
		}
		if err == nil {
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("after every member was removed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *world) nothingRuns() error {
	if held := w.fences.held(); len(held) > 0 {
		return fmt.Errorf("fences still held: %v", held)
	}
	for _, r := range w.replicas {
		for j, tr := range r.subscribers() {
			if names := tr.names(); len(names) > 0 {
				return fmt.Errorf("subscriber %d of replica %d still holds %v", j, r.i, names)
			}
		}
		if names := r.awareTr.names(); len(names) > 0 {
			return fmt.Errorf("replica %d's own Aware still holds %v", r.i, names)
		}
		// A removed member's probes are dropped as they come due (within
		// MaxBackoff); with probing disabled none is ever queued.
		if n := fleetpeek.ProbeEntries(r.e); n > 0 {
			return fmt.Errorf("the probe queue of replica %d (probes off %v) holds %d entries, every member removed", r.i, w.probesOff, n)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cl := range w.kept {
		if cl.running.Load() {
			return fmt.Errorf("cluster %s still runs after its member was removed", cl)
		}
	}
	for _, m := range w.members {
		for _, metric := range perClusterMetrics {
			if _, series := fleettest.Metric(w.t, metric, map[string]string{"cluster": m.engineName}); series > 0 {
				return fmt.Errorf("%d series of %s are left for %s, removed", series, metric, m.engineName)
			}
		}
	}
	return nil
}

// perClusterMetrics are the engine's metrics with a series per cluster:
// none is left once the cluster is removed from every replica.
var perClusterMetrics = []string{
	"multicluster_cluster_healthy",
	"multicluster_cluster_engaged",
	"multicluster_cluster_last_transition_timestamp_seconds",
	"multicluster_cluster_disconnected_seconds_total",
	"multicluster_cluster_probes_total",
	"multicluster_cluster_paused",
}
