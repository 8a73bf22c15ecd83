package manager_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// sourcedProvider publishes members through clusters.Members with a source
// object each, as inventory providers do.
type sourcedProvider struct {
	clusters.View
	members *clusters.Members
	started chan struct{}
}

func newSourcedProvider() *sourcedProvider {
	m := &clusters.Members{}
	return &sourcedProvider{View: m.View(), members: m, started: make(chan struct{})}
}

func (p *sourcedProvider) Start(ctx context.Context, aware multicluster.Aware) error {
	p.members.Start(ctx, aware, logr.Discard())
	close(p.started)
	<-ctx.Done()
	p.members.Wait()
	return nil
}

// settingsReports collects what the engine reports of each member.
type settingsReports struct {
	mu   sync.Mutex
	errs map[string][]error
}

func (r *settingsReports) report(name string) func(error) {
	return func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.errs == nil {
			r.errs = map[string][]error{}
		}
		r.errs[name] = append(r.errs[name], err)
	}
}

func (r *settingsReports) last(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if errs := r.errs[name]; len(errs) > 0 {
		return errs[len(errs)-1]
	}
	return errors.New("nothing reported yet")
}

// The settings hook adjusts one member's client by its name and source
// object: "slow" gets QPS 2, Burst 2 and a cache limited to one namespace,
// which its requests and its cache show; "fast" is built as its provider
// says; a hook that moves "moved" to another server is refused, reported
// naming the cluster, and the cluster is not built.
func TestClusterSettingsAdjustOneMember(t *testing.T) {
	ctx := context.Background()
	crmetrics.RegisterRESTClientMetrics(crmetrics.MetricRateLimiterLatency)
	ns := testbed.Name("settings")
	for _, i := range []int{1, 2} {
		testbed.CreateNamespace(t, testbed.NewClient(t, fleet.Config(i)), ns)
		testbed.CreateConfigMap(t, testbed.NewClient(t, fleet.Config(i)), ns, "target", nil)
	}

	type seen struct{ source string }
	var mu sync.Mutex
	saw := map[string]seen{}
	hook := func(name multicluster.ClusterName, source client.Object, cfg *rest.Config) []cluster.Option {
		mu.Lock()
		saw[name] = seen{source: source.GetName()}
		mu.Unlock()
		if cfg.BearerToken != "" || len(cfg.CertData) > 0 || len(cfg.KeyData) > 0 {
			t.Errorf("the hook of %q saw credentials", name)
		}
		switch source.GetLabels()["tier"] {
		case "slow":
			cfg.QPS, cfg.Burst = 2, 2
			return []cluster.Option{clusters.WithCacheNamespaces(ns)}
		case "elsewhere":
			cfg.Host = fleet.Config(2).Host
		}
		return nil
	}
	p := newSourcedProvider()
	mgr := fleettest.NewManager(t, fleet.Config(0), p, mcmanager.WithClusterSettings(hook))
	fleettest.RunManager(t, mgr)
	<-p.started

	source := func(name, tier string) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-source", Labels: map[string]string{"tier": tier}}}
	}
	reports := &settingsReports{}
	given := map[string]*rest.Config{"slow": fleet.Config(1), "fast": fleet.Config(2), "moved": fleet.Config(1)}
	for name, tier := range map[string]string{"slow": "slow", "fast": "fast", "moved": "elsewhere"} {
		p.members.Set(name, name, given[name], reports.report(name), clusters.SetSource(source(name, tier)))
	}
	engine := mgr.(mcmanager.FleetOwner).Fleet()
	fleettest.Eventually(t, 0, func() error {
		for _, name := range []string{"slow", "fast"} {
			if s, _ := engine.State(name); s != mcfleet.StateEngaged {
				return fmt.Errorf("%s is %s", name, s)
			}
		}
		err := reports.last("moved")
		if err == nil || !strings.Contains(err.Error(), `cluster "moved": the client settings hook changed Host`) {
			return fmt.Errorf("the report of moved: %v, want the hook's change of Host refused", err)
		}
		return nil
	})
	if s, _ := engine.State("moved"); s == mcfleet.StateEngaged {
		t.Errorf("moved is engaged: built against the host its hook set")
	}
	mu.Lock()
	for _, name := range []string{"slow", "fast", "moved"} {
		if got := saw[name].source; got != name+"-source" {
			t.Errorf("the hook of %q saw source %q, want %q", name, got, name+"-source")
		}
	}
	mu.Unlock()
	for name, cfg := range given {
		if cfg.QPS != fleet.Config(1).QPS || cfg.Burst != fleet.Config(1).Burst || cfg.Host != fleet.Config(map[bool]int{true: 2, false: 1}[name == "fast"]).Host {
			t.Errorf("the provider's config of %q was changed by the hook", name)
		}
	}

	slow, err := mgr.GetCluster(ctx, "slow")
	if err != nil {
		t.Fatal(err)
	}
	fast, err := mgr.GetCluster(ctx, "fast")
	if err != nil {
		t.Fatal(err)
	}
	if got := slow.GetConfig(); got.QPS != 2 || got.Burst != 2 {
		t.Errorf("slow's config has QPS %v, Burst %d, want 2 and 2", got.QPS, got.Burst)
	}
	// The cache scope: slow caches ns only; fast, every namespace.
	outside := client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "absent"}
	if err := slow.GetClient().Get(ctx, outside, &corev1.ConfigMap{}); err == nil || !strings.Contains(err.Error(), "unknown namespace for the cache") {
		t.Errorf("slow's cache read outside the namespace its hook gave: %v, want the cache's unknown namespace", err)
	}
	if err := fast.GetClient().Get(ctx, outside, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("fast's cache read of a ConfigMap that does not exist: %v, want not found", err)
	}

	// The rate: 20 Gets at once through each member's uncached reader. Each
	// client-go request waits for its client's rate limiter, which reports
	// the wait (rest_client_rate_limiter_duration_seconds, by host): at 2/s
	// with bursts of 2, the k-th request waits about (k-2)/2 s, so 16 of the
	// 20 wait more than a second; without a limit none waits at all.
	const gets = 20
	measure := func(cl cluster.Cluster) (long, count uint64, sum float64) {
		host := hostOf(t, cl.GetConfig().Host)
		long0, count0, sum0 := limiterWaits(t, host)
		var wg sync.WaitGroup
		for range gets {
			wg.Go(func() {
				if err := cl.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: ns, Name: "target"}, &corev1.ConfigMap{}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		long1, count1, sum1 := limiterWaits(t, host)
		return long1 - long0, count1 - count0, sum1 - sum0
	}
	long, count, sum := measure(slow)
	t.Logf("slow: %d requests waited %.1fs for the rate limiter in all, %d of them more than 1s", count, sum, long)
	if long < gets/2 {
		t.Errorf("slow: %d of %d requests at once waited more than 1s for the client's rate limiter, want at least %d (QPS 2, Burst 2)", long, gets, gets/2)
	}
	long, count, sum = measure(fast)
	t.Logf("fast: %d requests waited %.1fs for the rate limiter in all, %d of them more than 1s", count, sum, long)
	if long != 0 || sum > 1 {
		t.Errorf("fast: requests waited %.1fs for a rate limiter (%d more than 1s), want none: the hook gave it no limit", sum, long)
	}
}

// hostOf returns the host:port of a server URL, as client-go labels its
// metrics.
func hostOf(t *testing.T, server string) string {
	t.Helper()
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// limiterWaits reads rest_client_rate_limiter_duration_seconds of host: the
// waits longer than 1s, all waits and their sum in seconds.
func limiterWaits(t *testing.T, host string) (long, count uint64, sum float64) {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "rest_client_rate_limiter_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			match := false
			for _, l := range m.GetLabel() {
				match = match || (l.GetName() == "host" && l.GetValue() == host)
			}
			if !match {
				continue
			}
			h := m.GetHistogram()
			var within uint64
			found := false
			for _, b := range h.GetBucket() {
				if b.GetUpperBound() == 1 {
					within, found = b.GetCumulativeCount(), true
				}
			}
			if !found {
				t.Fatal("rest_client_rate_limiter_duration_seconds has no bucket at 1s")
			}
			long += h.GetSampleCount() - within
			count += h.GetSampleCount()
			sum += h.GetSampleSum()
		}
	}
	return long, count, sum
}
