package capi

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

var errNewCluster = errors.New("capi provider: Options.NewCluster is not supported: clusters are built by the fleet engine; configure them with Options.ClusterOptions")

// secret returns the kubeconfig Secret of obj: Options.GetSecret's, or the
// Secret key names. A missing Secret is a NotFound error either way.
func (p *Provider) secret(ctx context.Context, r client.Reader, key client.ObjectKey, obj client.Object) (*corev1.Secret, error) {
	if p.opts.GetSecret == nil {
		secret := &corev1.Secret{}
		if err := r.Get(ctx, key, secret); err != nil {
			return nil, err
		}
		return secret, nil
	}
	secret, err := p.opts.GetSecret(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("Options.GetSecret: %w", err)
	}
	if secret == nil {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), key.Name+" (Options.GetSecret returned none)")
	}
	return secret, nil
}

// ListClusters returns the names of the clusters the provider has engaged ("<namespace>/<name>"),
// sorted: upstream's shape (programs append the host's name and range over
// them). EngagedClusters returns the clusters themselves.
func (p *Provider) ListClusters() []multicluster.ClusterName {
	return p.ClusterNames()
}

// EngagedClusters returns the clusters the provider has engaged, by name. A
// cluster disengaged while the map is built is left out.
func (p *Provider) EngagedClusters() map[multicluster.ClusterName]cluster.Cluster {
	out := map[multicluster.ClusterName]cluster.Cluster{}
	for _, name := range p.ClusterNames() {
		if cl, err := p.Get(context.Background(), name); err == nil {
			out[name] = cl
		}
	}
	return out
}
