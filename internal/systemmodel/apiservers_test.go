package systemmodel_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mcruntime/multicluster-runtime/internal/fleetpeek"
	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	pkgclusters "github.com/mcruntime/multicluster-runtime/pkg/clusters"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	provclusters "github.com/mcruntime/multicluster-runtime/providers/clusters"
	"github.com/mcruntime/multicluster-runtime/providers/namespace"
)

// configProvider publishes rest.Configs through pkg/clusters.Members: the
// path of the kubeconfig, Secret and Cluster API providers.
type configProvider struct {
	members pkgclusters.Members
	started chan struct{}
}

func (p *configProvider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.members.Start(ctx, aware, logr.Discard())
	close(p.started)
	<-ctx.Done()
	p.members.Wait()
	return nil
}

func (p *configProvider) set(name multicluster.ClusterName, cfg *rest.Config) {
	sum := sha256.Sum256([]byte(cfg.Host + "|" + cfg.BearerToken + "|" + string(cfg.CertData)))
	p.members.Set(name, hex.EncodeToString(sum[:]), cfg, nil)
}

// maxPooled is the most connections the clusters of one member may hold
// open at once, whatever their churn: they share one pooled connection
// (client-go's transport cache), and a second while a watch and a request
// race for it.
const maxPooled = 3

// TestSystemOnAPIServers is the checker's smaller part on real API servers:
// two replicas, each a fleet engine running the namespace provider over a
// host API server, providers/clusters with a cluster of a member API server
// added, and pkg/clusters.Members publishing rest.Configs of that member;
// through a seeded schedule of hand-offs, renewal lapses, Namespaces created
// and deleted, and indexes registered with the providers at random moments,
// it checks after each quiet period that every cluster is engaged on the
// replica that owns it and nowhere else, and that the indexes registered
// with its provider answer MatchingFields lists there; with token and
// client-certificate rotations and churn, it checks the connections and
// connection gates to the member (see the package's doc).
func TestSystemOnAPIServers(t *testing.T) {
	if err := testbed.ProvideAssets(); err != nil {
		t.Fatalf("the control-plane binaries: %v", err)
	}
	seed := uint64(1)
	if *flagSeed != 0 {
		seed = *flagSeed
	}
	rng := rand.New(rand.NewPCG(seed, 17))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d failed; rerun it alone: go test -race -count=1 -run 'TestSystemOnAPIServers$' ./internal/systemmodel/ -systemmodel.seed=%d", seed, seed)
		}
	})
	servers := fleettest.New(t, 2) // 0: the host of the namespaces, 1: a member
	host, member := servers.Config(0), servers.Config(1)
	hostClient := testbed.NewClient(t, host)
	memberClient := testbed.NewClient(t, member)
	testbed.CreateNamespace(t, memberClient, "objects")
	// tok-a reaches the member with a token of a ServiceAccount: rotated in
	// turn to a token the member rejects (which must not take the working
	// cluster down) and to a fresh valid one.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "objects", Name: "member"}}
	if err := memberClient.Create(t.Context(), sa); err != nil {
		t.Fatal(err)
	}
	// It reads what the indexes registered with its provider list.
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "systemmodel-member"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "objects", Name: "member"}}}
	if err := memberClient.Create(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	tokens := 0
	tokenConfig := func() *rest.Config {
		tokens++
		token := testbed.BoundToken(t, memberClient, "objects", "member", fmt.Sprintf("token-%d", tokens))
		return &rest.Config{Host: member.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: member.CAData}}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "objects", Name: "indexed"}}
	if err := memberClient.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}

	v := &violations{}
	fences := newFenceService(2, grace, v)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	type rep struct {
		e       *fleet.Engine
		tr      *tracker
		ns      *namespace.Provider
		lent    *provclusters.Provider
		cfgs    *configProvider
		indexes []string
	}
	var reps []*rep
	for i := range 2 {
		r := &rep{tr: newTracker(nil), lent: provclusters.New(), cfgs: &configProvider{started: make(chan struct{})}}
		r.e = fleet.New(fleet.Options{Logger: testr.New(t).WithValues("replica", i), Admission: admission{s: fences, r: i},
			Health:     fleet.HealthOptions{Interval: 200 * time.Millisecond, FailureThreshold: 3, SuccessThreshold: 1},
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, DrainTimeout: time.Second})
		r.e.Subscribe(r.tr)
		r.ns = namespace.New(testbed.NewCluster(t, host))
		for what, start := range map[string]func() error{
			"engine":             func() error { return r.e.Start(ctx) },
			"namespace provider": func() error { return r.ns.Start(ctx, r.e) },
			"clusters provider":  func() error { return r.lent.Start(ctx, r.e) },
			"config provider":    func() error { return r.cfgs.Start(ctx, r.e) },
		} {
			wg.Go(func() {
				if err := start(); err != nil && ctx.Err() == nil {
					v.add("run", "replica %d: the %s returned: %v", i, what, err)
				}
			})
		}
		<-r.lent.Listed()
		<-r.cfgs.started
		reps = append(reps, r)
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	// The members: two rest.Configs of the member, a cluster of it added
	// on each replica, and two Namespaces of the host.
	// cfg-a and cfg-b reach the member through a proxy that counts their
	// connections: published again at each of their turns (churn), they
	// share the member's one pooled connection. cert-a reaches it with a
	// client certificate, through a proxy of its own, rotated in place at
	// each of its turns to another user's. Once they are removed, no
	// connection of theirs is left open.
	cfgMember, cfgProxy := testbed.Proxied(t, member)
	var users [2]*rest.Config
	for i := range users {
		cfg, err := servers.AddUser(1, envtest.User{Name: fmt.Sprintf("cert-user-%d", i), Groups: []string{"system:masters"}})
		if err != nil {
			t.Fatal(err)
		}
		users[i] = cfg
	}
	certs, certProxy := [2]*rest.Config{}, (*testbed.Proxy)(nil)
	certs[0], certProxy = testbed.Proxied(t, users[0])
	certs[1] = rest.CopyConfig(certs[0])
	certs[1].CertData, certs[1].KeyData = users[1].CertData, users[1].KeyData
	names := []multicluster.ClusterName{"cfg-a", "cfg-b", "lent-a", "ns-a", "ns-b", "tok-a", "cert-a"}
	tok := tokenConfig()
	for _, r := range reps {
		r.cfgs.set("cfg-a", cfgMember)
		r.cfgs.set("cfg-b", cfgMember)
		r.cfgs.set("tok-a", tok)
		r.cfgs.set("cert-a", certs[0])
		go func() {
			if err := r.lent.Add(ctx, "lent-a", testbed.NewCluster(t, member)); err != nil && ctx.Err() == nil {
				v.add("outcome", "Add of lent-a: %v", err)
			}
		}()
	}
	for _, ns := range []string{"ns-a", "ns-b"} {
		testbed.CreateNamespace(t, hostClient, ns)
	}

	// quiet checks, within a bound, that every name is engaged on its owner
	// only, and that its provider's indexes answer there.
	quiet := func(step int, gone map[multicluster.ClusterName]bool) {
		t.Helper()
		fleettest.Eventually(t, 60*time.Second, func() error {
			if v.any() {
				return nil // reported below
			}
			for _, name := range names {
				owner, _ := fences.ownerOf(name)
				for i, r := range reps {
					state, known := r.e.State(name)
					switch {
					case gone[name]:
						if known {
							return fmt.Errorf("step %d: %s, removed, is %s on replica %d", step, name, state, i)
						}
						continue
					case i != owner:
						if state != fleet.StateWanted {
							return fmt.Errorf("step %d: %s is %s on replica %d, which does not own it", step, name, state, i)
						}
						continue
					}
					cl, err := r.e.Get(name)
					if err != nil {
						return fmt.Errorf("step %d: %s, owned by replica %d, is not engaged there: %w", step, name, i, err)
					}
					if got, ok := r.tr.holds(name); !ok || got != cl {
						return fmt.Errorf("step %d: %s is engaged on replica %d, but its subscriber does not hold it", step, name, i)
					}
					if name[:3] == "ns-" || name[:4] == "tok-" {
						continue // indexes go to the shared cache; the token may not list
					}
					if name[:4] == "cfg-" {
						if n := cfgProxy.Open(); n > maxPooled {
							return fmt.Errorf("step %d: %d connections to the member of cfg-a and cfg-b are open, want at most %d: every request to a member goes over its pooled connection", step, n, maxPooled)
						}
					}
					for _, field := range r.indexes {
						var list corev1.ConfigMapList
						if err := cl.GetCache().List(ctx, &list, client.InNamespace("objects"), client.MatchingFields{field: "indexed"}); err != nil {
							return fmt.Errorf("step %d: %s on replica %d, listed by the index %s: %w", step, name, i, field, err)
						}
						if len(list.Items) != 1 {
							return fmt.Errorf("step %d: %s on replica %d, listed by the index %s: %d objects, want 1", step, name, i, field, len(list.Items))
						}
					}
				}
			}
			return nil
		})
		if v.any() {
			t.Fatalf("seed %d, step %d: %s", seed, step, v)
		}
	}
	quiet(0, nil)

	gone := map[multicluster.ClusterName]bool{}
	for step := 1; step <= 24; step++ {
		name := names[(step-1)%len(names)] // each name has its turn
		switch n := rng.IntN(20); {
		case n < 9:
			owner, _ := fences.ownerOf(name)
			fences.setOwner(name, 1-owner)
		case n < 14:
			fences.lose(name)
		case n < 18:
			field := fmt.Sprintf("name-%d", step)
			for _, r := range reps {
				r.indexes = append(r.indexes, field)
				extract := func(obj client.Object) []string { return []string{obj.GetName()} }
				if err := r.lent.IndexField(ctx, &corev1.ConfigMap{}, field, extract); err != nil {
					t.Fatalf("step %d: registering %s with the clusters provider: %v", step, field, err)
				}
				if err := r.cfgs.members.IndexField(ctx, &corev1.ConfigMap{}, field, extract); err != nil {
					t.Fatalf("step %d: registering %s with the config provider: %v", step, field, err)
				}
			}
		default:
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		}
		switch name {
		case "cfg-a", "cfg-b":
			for _, r := range reps {
				r.cfgs.members.Remove(name)
				r.cfgs.set(name, cfgMember)
			}
		case "cert-a":
			cert := step / len(names) % 2
			for _, r := range reps {
				r.cfgs.set(name, certs[1-cert])
			}
			// The rotated certificate is used: its connection is open.
			owner, _ := fences.ownerOf(name)
			fleettest.Eventually(t, 60*time.Second, func() error {
				cl, err := reps[owner].e.Get(name)
				if err != nil {
					return err
				}
				review := &authenticationv1.SelfSubjectReview{}
				if err := cl.GetClient().Create(ctx, review); err != nil {
					return err
				}
				if got, want := review.Status.UserInfo.Username, fmt.Sprintf("cert-user-%d", 1-cert); got != want {
					return fmt.Errorf("step %d: cert-a on replica %d reads as %s, want %s", step, owner, got, want)
				}
				return nil
			})
		}
		if name == "tok-a" {
			rejectedRotation(t, step, reps[0].e, reps[1].e, fences, tok, func(cfg *rest.Config) {
				for _, r := range reps {
					r.cfgs.set("tok-a", cfg)
				}
			}, func() *rest.Config { tok = tokenConfig(); return tok })
		}
		if step%8 == 0 {
			quiet(step, gone)
		}
	}
	// A Namespace deleted leaves every replica.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-b"}}
	if err := hostClient.Delete(ctx, ns); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	gone["ns-b"] = true
	quiet(25, gone)

	// Every member of the config provider removed: nothing of theirs is
	// left open to the member.
	for _, name := range []multicluster.ClusterName{"cfg-a", "cfg-b", "tok-a", "cert-a"} {
		for _, r := range reps {
			r.cfgs.members.Remove(name)
		}
		gone[name] = true
	}
	quiet(26, gone)
	fleettest.Eventually(t, 20*time.Second, func() error {
		// A transport nothing holds leaves client-go's cache; a connection
		// gate nothing holds leaves the process's table.
		runtime.GC()
		for _, p := range []*testbed.Proxy{cfgProxy, certProxy} {
			if n := fleetpeek.ConnGatesTo(p.Addr()); n > 0 {
				return fmt.Errorf("%d connection gates to %s are left after every cluster of it was removed", n, p.Addr())
			}
		}
		if n := cfgProxy.Open(); n > 0 {
			return fmt.Errorf("%d connections of cfg-a and cfg-b to the member are still open after their removal", n)
		}
		if n := certProxy.Open(); n > 0 {
			return fmt.Errorf("%d connections of cert-a (its client certificate rotated) to the member are still open after its removal", n)
		}
		return nil
	})
}

// rejectedRotation rotates tok-a's token (current, as its source gives it:
// the same server and CA), in every replica's source, to one
// the member rejects: the cluster engaged on its owner must keep working
// with the token it has (every read answers, it stays engaged, the same
// cluster) for ten probe intervals; then a fresh valid token is given.
func rejectedRotation(t *testing.T, step int, e0, e1 *fleet.Engine, fences *fenceService, current *rest.Config, set func(*rest.Config), fresh func() *rest.Config) {
	t.Helper()
	owner, _ := fences.ownerOf("tok-a")
	e := []*fleet.Engine{e0, e1}[owner]
	var cl cluster.Cluster
	fleettest.Eventually(t, 60*time.Second, func() error {
		var err error
		cl, err = e.Get("tok-a")
		return err
	})
	bad := rest.CopyConfig(current)
	bad.BearerToken = fmt.Sprintf("not-a-token-of-this-member-%d", step)
	set(bad)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		if err := cl.GetClient().Create(t.Context(), &authenticationv1.SelfSubjectReview{}); err != nil {
			t.Fatalf("step %d: tok-a's source was rotated to a token the member rejects: a read of the working cluster on replica %d failed: %v", step, owner, err)
		}
		if got, err := e.Get("tok-a"); err != nil || got != cl {
			t.Fatalf("step %d: tok-a's source was rotated to a token the member rejects: the working cluster on replica %d left (Get: %v, %v)", step, owner, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	set(fresh())
}
