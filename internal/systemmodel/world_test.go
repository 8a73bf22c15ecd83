package systemmodel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// The world the replicas run in: the members' API servers (how each one's
// /readyz answers), the fence service the replicas share, and the fake
// clusters the providers are handed or build.

// answer is how a server's /readyz answers the engines' probes.
type answer int32

const (
	answerHealthy      answer = iota
	answerFailing             // 500
	answerUnauthorized        // 401: the engine asks the provider for fresh credentials
	answerSlow                // healthy, after a delay around the probe timeout
)

func (a answer) String() string {
	return [...]string{"healthy", "failing", "unauthorized", "slow"}[a]
}

// servers is every member's API server as the probes see it: a
// RoundTripper keyed by the request's host.
type servers struct {
	mu   sync.Mutex
	by   map[string]answer
	slow time.Duration
}

func (s *servers) set(host string, a answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a == answerHealthy {
		delete(s.by, host)
		return
	}
	s.by[host] = a
}

func (s *servers) healAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.by)
}

func (s *servers) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	a := s.by[req.URL.Host]
	s.mu.Unlock()
	status := http.StatusOK
	switch a {
	case answerFailing:
		status = http.StatusInternalServerError
	case answerUnauthorized:
		status = http.StatusUnauthorized
	case answerSlow:
		select {
		case <-time.After(s.slow):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return &http.Response{StatusCode: status, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

// fakeCluster is a member's cluster: its Start blocks until its context
// ends and, as controller-runtime's, it starts once (a second Start answers
// "informer already started" at once); its cache syncs after syncDelay; its
// field indexer records the fields indexed. Any other method panics (the
// embedded interface is nil): the providers and the engine must not need it.
type fakeCluster struct {
	cluster.Cluster
	name      multicluster.ClusterName // the member's name, as its provider knows it
	host      string                   // its API server (servers)
	srv       *servers
	broken    bool // Start fails at once: it never runs
	syncDelay time.Duration

	starts  atomic.Int32
	running atomic.Bool
	stopped atomic.Bool

	mu     sync.Mutex
	fields map[string]struct{}
}

func (f *fakeCluster) String() string { return fmt.Sprintf("%s@%p", f.name, f) }

func (f *fakeCluster) Start(ctx context.Context) error {
	if f.broken {
		// It fails as its first lists are refused: after a while.
		t := time.NewTimer(f.syncDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return errors.New("start failed: its server refuses the cache's lists")
	}
	if f.starts.Add(1) > 1 {
		return errors.New("informer already started") // controller-runtime's words
	}
	f.running.Store(true)
	<-ctx.Done()
	f.running.Store(false)
	f.stopped.Store(true)
	return nil
}

func (f *fakeCluster) GetCache() cache.Cache { return fakeCache{f: f} }

func (f *fakeCluster) GetFieldIndexer() client.FieldIndexer { return fakeIndexer{f: f} }

func (f *fakeCluster) GetHTTPClient() *http.Client { return &http.Client{Transport: f.srv} }

func (f *fakeCluster) GetConfig() *rest.Config { return &rest.Config{Host: "https://" + f.host} }

func (f *fakeCluster) GetScheme() *runtime.Scheme { return scheme.Scheme }

// missing returns the fields of want the cluster was not indexed by.
func (f *fakeCluster) missing(want []string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, field := range want {
		if _, ok := f.fields[field]; !ok {
			out = append(out, field)
		}
	}
	return out
}

type fakeCache struct {
	cache.Cache
	f *fakeCluster
}

func (c fakeCache) WaitForCacheSync(ctx context.Context) bool {
	if c.f.broken {
		<-ctx.Done()
		return false
	}
	t := time.NewTimer(c.f.syncDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type fakeIndexer struct{ f *fakeCluster }

func (x fakeIndexer) IndexField(_ context.Context, _ client.Object, field string, _ client.IndexerFunc) error {
	x.f.mu.Lock()
	defer x.f.mu.Unlock()
	if x.f.fields == nil {
		x.f.fields = map[string]struct{}{}
	}
	x.f.fields[field] = struct{}{}
	return nil
}

// sharedCluster is the cluster a replica's namespace provider is handed:
// its cache's Namespace informer replays what it holds to every handler
// added, as a real informer's does; the test creates and deletes
// Namespaces in it.
type sharedCluster struct {
	cluster.Cluster
	host     string
	srv      *servers
	informer *nsInformer
}

func newSharedCluster(host string, srv *servers) *sharedCluster {
	return &sharedCluster{host: host, srv: srv, informer: &nsInformer{
		FakeInformer: controllertest.NewFakeInformer(controllertest.Synced), objs: map[string]*corev1.Namespace{}}}
}

func (s *sharedCluster) Start(ctx context.Context) error { <-ctx.Done(); return nil }

func (s *sharedCluster) GetCache() cache.Cache { return sharedCache{s: s} }

func (s *sharedCluster) GetClient() client.Client { return nil }

func (s *sharedCluster) GetAPIReader() client.Reader { return nil }

func (s *sharedCluster) GetScheme() *runtime.Scheme { return scheme.Scheme }

func (s *sharedCluster) GetFieldIndexer() client.FieldIndexer { return sharedCache{s: s} }

func (s *sharedCluster) GetHTTPClient() *http.Client { return &http.Client{Transport: s.srv} }

func (s *sharedCluster) GetConfig() *rest.Config { return &rest.Config{Host: "https://" + s.host} }

type sharedCache struct {
	cache.Cache
	s *sharedCluster
}

func (c sharedCache) WaitForCacheSync(context.Context) bool { return true }

func (c sharedCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	if _, ok := obj.(*corev1.Namespace); !ok {
		return nil, fmt.Errorf("the shared fake cluster serves Namespaces only, not %T", obj)
	}
	return c.s.informer, nil
}

func (c sharedCache) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// nsInformer is a Namespace informer that holds its objects: a handler
// added is told of each, as a real informer tells it of its initial list.
type nsInformer struct {
	*controllertest.FakeInformer
	mu   sync.Mutex
	objs map[string]*corev1.Namespace
}

func (i *nsInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	reg, err := i.FakeInformer.AddEventHandler(h)
	names := make([]string, 0, len(i.objs))
	for name := range i.objs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		h.OnAdd(i.objs[name], true)
	}
	return reg, err
}

func (i *nsInformer) RemoveEventHandler(toolscache.ResourceEventHandlerRegistration) error {
	return nil
}

func (i *nsInformer) create(name string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	ns := &corev1.Namespace{}
	ns.Name = name
	i.objs[name] = ns
	i.FakeInformer.Add(ns)
}

func (i *nsInformer) remove(name string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if ns, ok := i.objs[name]; ok {
		delete(i.objs, name)
		i.FakeInformer.Delete(ns)
	}
}

// fenceService is the sharding coordinator the replicas share: it decides
// which replica owns each name, and grants each name's fence to one replica
// at a time. Acquire blocks while the fence is held by another replica
// (until it is released) or while the service is blocked; it fails while
// the replica's host is out. A fence lost to a renewal lapse stays held
// until its holder releases it.
//
// It checks, at every grant, that the fence goes to the replica that owns
// the name: a grant to a replica the name was handed away from more than
// grace before is a violation (the engine kept waiting for a fence it no
// longer owns, and competes with the rightful owner).
type fenceService struct {
	mu       sync.Mutex
	replicas int
	grace    time.Duration
	owner    map[string]int
	gen      map[string]int       // ownership changes of each name
	flipped  map[string]time.Time // when each name's owner last changed
	holder   map[string]*grant
	blocked  bool
	down     []bool
	wake     chan struct{} // closed when a fence frees up or the service unblocks
	changed  []chan struct{}
	grants   int

	violations *violations
}

type grant struct {
	replica int
	lose    context.CancelCauseFunc
}

func newFenceService(replicas int, grace time.Duration, v *violations) *fenceService {
	s := &fenceService{replicas: replicas, grace: grace, owner: map[string]int{}, gen: map[string]int{},
		flipped: map[string]time.Time{}, holder: map[string]*grant{}, down: make([]bool, replicas),
		wake: make(chan struct{}), violations: v}
	for range replicas {
		s.changed = append(s.changed, make(chan struct{}))
	}
	return s
}

// ownerLocked is name's owner: the replica set last, or one chosen by the
// name's bytes.
func (s *fenceService) ownerLocked(name string) int {
	if r, ok := s.owner[name]; ok {
		return r
	}
	h := 0
	for _, c := range []byte(name) {
		h = h*31 + int(c)
	}
	r := (h%s.replicas + s.replicas) % s.replicas
	s.owner[name] = r
	return r
}

func (s *fenceService) ownerOf(name string) (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownerLocked(name), s.gen[name]
}

func (s *fenceService) setOwner(name string, r int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ownerLocked(name) == r {
		return
	}
	s.owner[name] = r
	s.gen[name]++
	s.flipped[name] = time.Now()
	for i, c := range s.changed {
		close(c)
		s.changed[i] = make(chan struct{})
	}
}

func (s *fenceService) wakeLocked() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *fenceService) setBlocked(b bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked = b
	if !b {
		s.wakeLocked()
	}
}

// lose ends name's fence as a renewal lapse does.
func (s *fenceService) lose(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.holder[name]; ok {
		g.lose(errors.New("lost: renewal lapsed"))
	}
}

// outage takes replica r's host away (every fence it holds lapses, and it
// cannot acquire any), or brings it back.
func (s *fenceService) outage(r int, out bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down[r] = out
	if out {
		for _, g := range s.holder {
			if g.replica == r {
				g.lose(errors.New("lost: the host's API server is unreachable"))
			}
		}
	}
	s.wakeLocked()
}

func (s *fenceService) heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked = false
	clear(s.down)
	s.wakeLocked()
}

func (s *fenceService) held() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for name, g := range s.holder {
		out[name] = g.replica
	}
	return out
}

// admission is replica r's view of the fence service: a fleet.Admission.
type admission struct {
	s *fenceService
	r int
}

func (a admission) Owns(name string) bool {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	return a.s.ownerLocked(name) == a.r
}

func (a admission) Changed() <-chan struct{} {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	return a.s.changed[a.r]
}

func (a admission) Acquire(ctx context.Context, name string) (context.Context, func(), error) {
	s := a.s
	for {
		s.mu.Lock()
		if s.down[a.r] {
			s.mu.Unlock()
			return nil, nil, fmt.Errorf("cluster %q: acquiring the fence: the host's API server is unreachable", name)
		}
		if _, held := s.holder[name]; !held && !s.blocked {
			if owner := s.ownerLocked(name); owner != a.r {
				if since := time.Since(s.flipped[name]); since > s.grace {
					s.violations.add("fence", "replica %d took the fence of %s, owned by replica %d since %s ago (handed away from it: its Acquire was not cancelled)",
						a.r, name, owner, since.Round(time.Millisecond))
				}
			}
			fenced, lose := context.WithCancelCause(context.Background())
			g := &grant{replica: a.r, lose: lose}
			s.holder[name] = g
			s.grants++
			s.mu.Unlock()
			return fenced, sync.OnceFunc(func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.holder[name] == g {
					delete(s.holder, name)
					s.wakeLocked()
				}
				lose(errors.New("released"))
			}), nil
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// violations collects what the checker saw go wrong while the schedule ran.
type violations struct {
	mu   sync.Mutex
	list []string
	// gated are the invariants whose violations are known (listed in
	// knownDefects) and not reported.
	gated map[string]int
}

func (v *violations) add(invariant, format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if knownDefects[invariant] {
		if v.gated == nil {
			v.gated = map[string]int{}
		}
		v.gated[invariant]++
		return
	}
	v.list = append(v.list, invariant+": "+fmt.Sprintf(format, args...))
}

func (v *violations) String() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return strings.Join(v.list, "\n")
}

func (v *violations) any() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.list) > 0
}

// tracker is a subscriber of an engine (a controller, a runnable): it
// holds each cluster it was engaged with until the engagement ends, and
// checks that it is never engaged with a cluster its replica was told
// more than grace before that it does not own.
type tracker struct {
	mu      sync.Mutex
	engaged map[multicluster.ClusterName]held
	check   func(name multicluster.ClusterName)
}

type held struct {
	cl  cluster.Cluster
	ctx context.Context
}

func newTracker(check func(multicluster.ClusterName)) *tracker {
	return &tracker{engaged: map[multicluster.ClusterName]held{}, check: check}
}

func (t *tracker) Start(ctx context.Context) error { <-ctx.Done(); return nil }

func (t *tracker) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.check != nil {
		t.check(name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.engaged[name] = held{cl: cl, ctx: ctx}
	context.AfterFunc(ctx, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if h, ok := t.engaged[name]; ok && h.ctx == ctx {
			delete(t.engaged, name)
		}
	})
	return nil
}

// holds returns the cluster t holds for name, if its engagement is live.
func (t *tracker) holds(name multicluster.ClusterName) (cluster.Cluster, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.engaged[name]
	if !ok || h.ctx.Err() != nil {
		return nil, false
	}
	return h.cl, true
}

func (t *tracker) names() []multicluster.ClusterName {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []multicluster.ClusterName
	for name, h := range t.engaged {
		if h.ctx.Err() == nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
