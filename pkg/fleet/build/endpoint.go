package build

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// EndpointHash hashes where and the kind of who (see SplitCredentials): two
// configs of the same hash reach the same server, trust it the same way and
// differ at most in the values of their credentials, which can then be
// rotated in place (Holder.Set). ok is false for a config that must be
// identified by its whole content: one whose effect cannot be read (a
// custom transport, dialer or wrapper), a client certificate beside an exec
// plugin or auth provider, or a client certificate and key that do not make
// a pair (client-go's error is reported by the build).
func EndpointHash(where *rest.Config, who Credentials) (hash string, ok bool) {
	if !validCertificate(who) {
		return "", false
	}
	return endpointHash(where, who)
}

// Generation is the number of credentials h has held: 1 for those it was
// made with, one more for each Set.
func (h *Holder) Generation() uint64 { return h.cur.Load().gen }

// FromEndpoint builds the cluster name runs: where (a config without
// credentials) authenticated with what h holds at each request, with opts.
// A settings hook, if not nil, sees where and source first (never the
// credentials) and adds client settings and options for this cluster alone.
// The server is then checked (probe) over the cluster's own connection; the
// cluster is returned built, not started.
func FromEndpoint(ctx context.Context, name multicluster.ClusterName, where *rest.Config, h *Holder,
	source client.Object, hook SettingsFunc, opts []cluster.Option) (cluster.Cluster, error) {
	if hook != nil {
		adjusted, more, err := applySettings(hook, name, source, where)
		if err != nil {
			return nil, err
		}
		where, opts = adjusted, append(opts[:len(opts):len(opts)], more...)
	}
	cl, err := newCluster(withCredentials(where, h.cur.Load().who), h, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating cluster: %w", err)
	}
	if err := probe(ctx, cl); err != nil {
		cl.discard()
		return nil, err
	}
	return cl, nil
}

// probeTimeout bounds the reachability check made before a cluster is
// engaged.
const probeTimeout = 10 * time.Second

// probe checks that the server of cl, built and not started, answers and
// accepts the credentials: without it, a cluster whose server is down would
// engage (its cache has nothing to sync yet) and only fail later, in every
// controller. The check goes through cl's own HTTP client, so over the
// connection the cluster then uses: a client of another configuration (one
// that asks for compressed responses, say) would have a transport and a
// connection of its own, open for client-go's idle timeout after each check.
func probe(ctx context.Context, cl *lightCluster) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cfg := cl.GetConfig()
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, cl.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating discovery client: %w", err)
	}
	if err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return fmt.Errorf("server %s did not answer: %w", redact.URL(cfg.Host), redact.Err(err))
	}
	return nil
}
