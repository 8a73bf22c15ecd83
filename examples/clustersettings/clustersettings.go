// Package clustersettings holds the code of the book's section on per-cluster
// client settings and provider health checks
// (docs/core-concepts/providers.md#per-cluster-client-settings), compiled
// with the module so that every snippet builds against the current API.
// Nothing here is meant to be imported.
package clustersettings

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// Throttled returns a manager whose members labelled tier=edge on their
// inventory object get a lower request rate and a cache of one namespace.
func Throttled(cfg *rest.Config, provider multicluster.Provider) (mcmanager.Manager, error) {
	// snippet:cluster-settings
	return mcmanager.New(cfg, provider, mcmanager.Options{},
		// Called at every build, with the cluster's name, the inventory
		// object it was read from (nil for providers that read none) and a
		// copy of its rest.Config without credentials.
		mcmanager.WithClusterSettings(func(name multicluster.ClusterName, source client.Object, cfg *rest.Config) []cluster.Option {
			if source == nil || source.GetLabels()["tier"] != "edge" {
				return nil
			}
			cfg.QPS, cfg.Burst = 5, 10
			cfg.UserAgent = "fleet-controller/edge"
			// Options for this cluster alone, after every other option.
			return []cluster.Option{clusters.WithCacheNamespaces("apps")}
		}),
	)
	// end-snippet
}

// WithCRDCheck returns a kubeconfig provider whose clusters are healthy only
// while they serve a CRD.
func WithCRDCheck() *kubeconfig.Provider {
	// snippet:provider-health-check
	return kubeconfig.New(kubeconfig.Options{
		// Run on every probe of this provider's clusters, after /readyz and
		// the manager's own check: an error counts as a failed probe.
		HealthCheck: func(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
			crd := &metav1.PartialObjectMetadata{} // metadata only: no scheme needed
			crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			if err := cl.GetAPIReader().Get(ctx, client.ObjectKey{Name: "widgets.example.com"}, crd); err != nil {
				return fmt.Errorf("widgets.example.com is not served: %w", err)
			}
			return nil
		},
	})
	// end-snippet
}
