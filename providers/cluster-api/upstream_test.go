package capi_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	capi "github.com/mcruntime/multicluster-runtime/providers/cluster-api"
)

// Options.GetSecret chooses each Cluster's kubeconfig Secret; ListClusters
// lists what was engaged.
func TestGetSecretAndListClusters(t *testing.T) {
	var host client.Client
	getSecret := func(ctx context.Context, c client.Object) (*corev1.Secret, error) {
		s := &corev1.Secret{} // kept under a name of the application's
		err := host.Get(ctx, client.ObjectKey{Namespace: c.GetNamespace(), Name: "creds-of-" + c.GetName()}, s)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return s, err
	}
	e := newEnv(t, 0)
	host = e.host
	secret := e.secret("a", kubeconfig(t, 1, "capi-getsecret"))
	secret.Name = "creds-of-a"
	e.create(t, secret)
	e.run(t, 0, capi.Options{GetSecret: getSecret}, nil)
	e.cluster(t, "a", true, nil)
	expectEngaged(t, e.tracker, map[string]identity{e.name("a"): {Member: 1, Kubeconfig: string(secret.Data[capi.KubeconfigSecretKey])}})
	p := e.mgr.GetProvider().(*capi.Provider)
	if got := p.ListClusters(); !slices.Equal(got, []multicluster.ClusterName{e.name("a")}) {
		t.Fatalf("ListClusters = %v, want %s", got, e.name("a"))
	}
	if got := p.EngagedClusters(); len(got) != 1 || got[e.name("a")] == nil {
		t.Fatalf("EngagedClusters = %v, want %s", got, e.name("a"))
	}
}

func TestNewClusterIsRefused(t *testing.T) {
	p := capi.New(capi.Options{NewCluster: func(context.Context, multicluster.ClusterName, *rest.Config, ...cluster.Option) (cluster.Cluster, error) {
		return nil, errors.New("unused")
	}})
	mgr, err := mcmanager.New(fleet.Config(0), p, mcmanager.Options{Metrics: server.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetupWithManager(mgr); err == nil || !strings.Contains(err.Error(), "configure them with Options.ClusterOptions") {
		t.Fatalf("SetupWithManager with NewCluster: %v, want an error saying what to use", err)
	}
}
