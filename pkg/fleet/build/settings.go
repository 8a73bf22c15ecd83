package build

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// SettingsFunc adjusts the client of one cluster when it is built: it may
// change cfg's client settings (QPS, Burst, Timeout, UserAgent, content
// types, the warning handler, a rate limiter) and returns cluster options
// for it alone (its cache scope, say), applied after every other option.
// source is the inventory object the cluster was read from (a kubeconfig
// Secret, a Cluster API Cluster, a ClusterProfile), or nil for providers that
// read none; treat it as read-only. The kit (pkg/inventory) hands it over
// without managed fields and, for a Secret, without its data.
//
// cfg is a copy made for this build, without credentials: the hook cannot
// change the provider's config, and it may not change where the cluster is
// or who the controller is there (the server, its CA and TLS settings, the
// proxy, the transport, credentials, impersonation): a build whose hook
// changed any of these fails with an error naming the cluster and the
// fields, reported as any failed build is, and the cluster is not built.
//
// The hook runs at each build: a change of the source object that does not
// change what the cluster is built from (its annotations, say) takes effect
// the next time the cluster is built, not at once.
type SettingsFunc func(name multicluster.ClusterName, source client.Object, cfg *rest.Config) []cluster.Option

// applySettings runs hook on a copy of where (a config without credentials,
// see SplitCredentials) and returns where with the client settings the hook
// set, and the hook's options; or an error naming the cluster if the hook
// changed where the cluster is or who the controller is there. Only the
// client settings are taken from the hook's copy, so that a change the
// comparison cannot see (a closure replaced by another of the same code)
// has no effect either.
func applySettings(hook SettingsFunc, name multicluster.ClusterName, source client.Object, where *rest.Config) (*rest.Config, []cluster.Option, error) {
	adjusted := rest.CopyConfig(where)
	opts := hook(name, source, adjusted)
	if changed := endpointChanges(where, adjusted); len(changed) > 0 {
		return nil, nil, fmt.Errorf("cluster %q: the client settings hook changed %s: it may change client settings only (QPS, Burst, RateLimiter, Timeout, UserAgent, content types, compression, warning handlers), never where the cluster is or the credentials; the cluster is not built",
			name, strings.Join(changed, ", "))
	}
	out := rest.CopyConfig(where)
	out.ContentConfig = adjusted.ContentConfig
	out.UserAgent, out.DisableCompression = adjusted.UserAgent, adjusted.DisableCompression
	out.QPS, out.Burst, out.RateLimiter, out.Timeout = adjusted.QPS, adjusted.Burst, adjusted.RateLimiter, adjusted.Timeout
	out.WarningHandler, out.WarningHandlerWithContext = adjusted.WarningHandler, adjusted.WarningHandlerWithContext
	return out, opts, nil
}

// clientSettings are the fields of rest.Config a SettingsFunc may change.
var clientSettings = map[string]bool{"ContentConfig": true, "UserAgent": true, "DisableCompression": true,
	"QPS": true, "Burst": true, "RateLimiter": true, "Timeout": true, "WarningHandler": true, "WarningHandlerWithContext": true}

// endpointChanges names the fields of after that differ from before among
// those that decide which endpoint is reached, how it is trusted and who the
// controller is there: every field but the client settings, so that a field
// client-go adds later is refused until it is known to be harmless.
// Functions compare by the code they run (two closures of the same code with
// other captured values look the same: applySettings takes neither from the
// hook anyway), the proxy by what it answers for the server (clientcmd's
// http.ProxyURL closures all run the same code), interface values that
// cannot be compared count as changed.
func endpointChanges(before, after *rest.Config) []string {
	var out []string
	vb, va := reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem()
	for i := range vb.NumField() {
		name, fb, fa := vb.Type().Field(i).Name, vb.Field(i), va.Field(i)
		var same bool
		switch {
		case clientSettings[name]:
			continue
		case name == "Proxy":
			pb, okb := proxyOf(before)
			pa, oka := proxyOf(after)
			same = okb && oka && pb == pa
		case fb.Kind() == reflect.Func:
			same = fb.IsNil() == fa.IsNil() && (fb.IsNil() || fb.Pointer() == fa.Pointer())
		case fb.Kind() == reflect.Interface:
			same = fb.IsNil() == fa.IsNil() && (fb.IsNil() || fb.Elem().Type() == fa.Elem().Type() && fb.Elem().Comparable() && fb.Equal(fa))
		default:
			same = reflect.DeepEqual(fb.Interface(), fa.Interface())
		}
		if !same {
			out = append(out, name)
		}
	}
	return out
}

// proxyOf returns what cfg's proxy answers for its server, "" for none; ok
// is false if the proxy cannot be read.
func proxyOf(cfg *rest.Config) (proxy string, ok bool) {
	if cfg.Proxy == nil {
		return "", true
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", false
	}
	p, err := cfg.Proxy(&http.Request{URL: u})
	if err != nil || p == nil {
		return "", err == nil
	}
	return p.String(), true
}
