package clusters

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// NewCluster is cluster.New with the defaults every provider-built cluster
// needs; providers use it to build their clusters, and opts may still
// override anything:
//
//   - A shared REST mapper: clusters that reach the same API server with the
//     same credentials share its discovery data, which is loaded lazily, one
//     group version at a time (NewLazyRESTMapper). The cluster's share is
//     released when its Start returns.
//   - Client limits as controller-runtime gives the host: a config that sets
//     no QPS gets no client-side rate limit (client-go's default of 5
//     requests/s would make a busy member's queue grow without bound); the
//     API server's priority and fairness protects it. WithClientRateLimits
//     sets one.
//   - Every request except long-running ones is bounded by
//     DefaultRequestTimeout (WithRequestTimeout changes it), so that a member
//     that never answers cannot hold a reconcile for long.
func NewCluster(cfg *rest.Config, opts ...cluster.Option) (cluster.Cluster, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	base, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating HTTP client: %w", err)
	}
	// A copy: for a plain config, HTTPClientFor returns http.DefaultClient.
	httpClient := *base
	next := httpClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	httpClient.Transport = &boundedTransport{next: next, timeout: DefaultRequestTimeout}
	var handle *sharedMapper
	defaults := []cluster.Option{
		func(o *cluster.Options) {
			o.MapperProvider = func(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
				m, err := sharedMappers.mapperFor(c, hc)
				if err != nil {
					return nil, err
				}
				handle = m
				return m, nil
			}
		},
		func(o *cluster.Options) { o.HTTPClient = &httpClient },
	}
	cl, err := cluster.New(cfg, append(defaults, opts...)...)
	if err != nil {
		if handle != nil {
			handle.release()
		}
		return nil, err
	}
	if handle == nil {
		return cl, nil // opts chose another mapper
	}
	return &mapperReleasingCluster{Cluster: cl, release: handle.release}, nil
}

// mapperReleasingCluster gives its share of the shared mapper back when it
// stops, rather than when the garbage collector gets to it.
type mapperReleasingCluster struct {
	cluster.Cluster
	release func()
}

func (c *mapperReleasingCluster) Start(ctx context.Context) error {
	defer c.release()
	return c.Cluster.Start(ctx)
}
