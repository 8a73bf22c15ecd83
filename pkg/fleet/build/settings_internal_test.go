package build

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
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
