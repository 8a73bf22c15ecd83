package clusters

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// The settings hook may change client settings only: a change of where the
// cluster is, how it is trusted or who the controller is there is refused,
// naming the cluster and the field; and only the client settings are taken
// from the hook's copy.
func TestSettingsHookMayChangeClientSettingsOnly(t *testing.T) {
	proxyTo := func(host string) func(*http.Request) (*url.URL, error) {
		return http.ProxyURL(&url.URL{Scheme: "http", Host: host})
	}
	where := func() *rest.Config {
		return &rest.Config{Host: "https://member.example:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")},
			Proxy: proxyTo("proxy.example:3128")}
	}
	refused := map[string]func(*rest.Config){
		"Host":            func(c *rest.Config) { c.Host = "https://elsewhere.example" },
		"APIPath":         func(c *rest.Config) { c.APIPath = "/other" },
		"TLSClientConfig": func(c *rest.Config) { c.Insecure = true },
		"BearerToken":     func(c *rest.Config) { c.BearerToken = "stolen" },
		"BearerTokenFile": func(c *rest.Config) { c.BearerTokenFile = "/var/run/token" },
		"Username":        func(c *rest.Config) { c.Username = "admin" },
		"Impersonate":     func(c *rest.Config) { c.Impersonate.UserName = "system:admin" },
		"Transport":       func(c *rest.Config) { c.Transport = http.DefaultTransport },
		"WrapTransport": func(c *rest.Config) {
			c.WrapTransport = transport.WrapperFunc(func(rt http.RoundTripper) http.RoundTripper { return rt })
		},
		"Dial": func(c *rest.Config) {
			c.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, nil }
		},
		// The same code as the original proxy, another address.
		"Proxy": func(c *rest.Config) { c.Proxy = proxyTo("evil.example:3128") },
	}
	for field, change := range refused {
		hook := func(_ multicluster.ClusterName, _ client.Object, cfg *rest.Config) []cluster.Option {
			change(cfg)
			return nil
		}
		_, _, err := applySettings(hook, "edge-17", nil, where())
		if err == nil || !strings.Contains(err.Error(), `cluster "edge-17"`) || !strings.Contains(err.Error(), "changed "+field) {
			t.Errorf("a hook that changes %s: %v, want it refused naming the cluster and the field", field, err)
		}
	}

	given := where()
	opt := cluster.Option(func(*cluster.Options) {})
	got, opts, err := applySettings(func(_ multicluster.ClusterName, _ client.Object, cfg *rest.Config) []cluster.Option {
		cfg.QPS, cfg.Burst, cfg.Timeout, cfg.UserAgent = 2, 3, time.Second, "edge"
		return []cluster.Option{opt}
	}, "edge-17", nil, given)
	if err != nil {
		t.Fatal(err)
	}
	if got.QPS != 2 || got.Burst != 3 || got.Timeout != time.Second || got.UserAgent != "edge" || len(opts) != 1 {
		t.Errorf("client settings not taken: %+v, %d options", got, len(opts))
	}
	if given.QPS != 0 || given.UserAgent != "" {
		t.Error("the hook changed the config it was given, not a copy")
	}
	if got.Host != given.Host || string(got.CAData) != "ca" {
		t.Errorf("the endpoint changed: %s", got.Host)
	}
}

// publications records what Members publishes.
type publications struct{ set []fleet.Member }

func (p *publications) Engage(context.Context, multicluster.ClusterName, cluster.Cluster) error {
	return nil
}
func (p *publications) SetMember(m fleet.Member)                                { p.set = append(p.set, m) }
func (p *publications) RemoveMember(multicluster.ClusterName)                   {}
func (p *publications) Lookup(multicluster.ClusterName) (cluster.Cluster, bool) { return nil, false }

// A pause alone publishes the member again under the same Hash with Paused
// changed (the engine changes the pause only, never rebuilds); a new source
// object alone publishes nothing.
func TestSetPausedRepublishesTheSameHash(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := &publications{}
	var m Members
	m.Start(ctx, pub, logr.Discard())
	cfg := &rest.Config{Host: "https://member.example:6443", BearerToken: "t"}
	m.Set("a", "h1", cfg, nil)
	m.Set("a", "h1", cfg, nil, SetSource(&corev1.Secret{}))
	if len(pub.set) != 1 {
		t.Fatalf("a new source alone published the member again (%d publications)", len(pub.set))
	}
	for i, paused := range []bool{true, true, false} {
		if replaced, changed := m.Set("a", "h1", cfg, nil, SetPaused(paused)); !replaced || changed {
			t.Errorf("pause %v: replaced %v, changed %v; want true, false", paused, replaced, changed)
		}
		want := []int{2, 2, 3}[i]
		if len(pub.set) != want {
			t.Fatalf("after pause %v: %d publications, want %d", paused, len(pub.set), want)
		}
		last := pub.set[len(pub.set)-1]
		if last.Hash != pub.set[0].Hash || last.Paused != paused {
			t.Errorf("after pause %v: published Hash %q Paused %v, want Hash %q", paused, last.Hash, last.Paused, pub.set[0].Hash)
		}
	}
}
