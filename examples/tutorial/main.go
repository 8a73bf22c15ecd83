// snippet:tutorial-main

// Command fleet-controller is the controller of the tutorial
// (docs/getting-started/tutorial.md): it reconciles the ConfigMaps of every
// cluster whose kubeconfig is stored in a labelled Secret of its namespace
// (kubeconfig provider), and runs in a cluster with the manifests of config/.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"os"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcbuilder "github.com/mcruntime/multicluster-runtime/pkg/builder"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

func main() {
	var namespace, metricsAddr, metricsCertDir, probeAddr string
	var leaderElect, shard, metricsSecure, enableHTTP2 bool
	flag.StringVar(&namespace, "namespace", "fleet-system", "namespace of the kubeconfig Secrets and of the leader election Lease")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of /metrics and /clusters (0 disables them)")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "serve /metrics and /clusters over HTTPS to authenticated and authorized clients only; false serves them over plain HTTP to anyone who reaches the port")
	flag.StringVar(&metricsCertDir, "metrics-cert-dir", "", "directory of the metrics server's tls.crt and tls.key (empty: a self-signed certificate made at start)")
	flag.BoolVar(&enableHTTP2, "enable-http2", false, "allow HTTP/2 on the metrics server (off: HTTP/1.1 only, against HTTP/2 stream floods)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader so that only one replica reconciles")
	flag.BoolVar(&shard, "sharding", false, "share the clusters between the replicas instead of electing a leader")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("fleet-controller")

	// The provider engages one cluster per labelled kubeconfig Secret.
	provider := kubeconfig.New(kubeconfig.Options{Namespace: namespace})
	var mcOpts []mcmanager.Option
	if shard { // each cluster is run by one live replica, fenced by Leases in the namespace
		mcOpts = append(mcOpts, mcmanager.WithSharding(sharding.Options{Namespace: namespace, Name: "fleet-controller"}))
	}
	// /metrics and /clusters (the status endpoint, on the same listener):
	// HTTPS, and every request authenticated (TokenReview) and authorized
	// (SubjectAccessReview: get on the path) by the host's API server.
	metrics := metricsserver.Options{BindAddress: metricsAddr, SecureServing: metricsSecure, CertDir: metricsCertDir}
	if metricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if !enableHTTP2 {
		metrics.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), provider, mcmanager.Options{
		Metrics:                 metrics,
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "fleet-controller",
		LeaderElectionNamespace: namespace,
	}, mcOpts...)
	if err != nil {
		log.Error(err, "creating the manager")
		os.Exit(1)
	}
	// The manager already registers the readiness check "clusters" (every
	// cluster known at start-up engaged or declared disconnected); liveness
	// only says that the process answers.
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		log.Error(err, "adding the liveness check")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	// The provider is a controller on the host cluster: it watches the Secrets.
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		log.Error(err, "setting up the kubeconfig provider")
		os.Exit(1)
	}

	err = mcbuilder.ControllerManagedBy(mgr).
		Named("configmaps").
		For(&corev1.ConfigMap{}).
		Complete(mcreconcile.Func(func(ctx context.Context, req mcreconcile.Request) (mcreconcile.Result, error) {
			cl, err := mgr.GetCluster(ctx, req.ClusterName)
			if err != nil {
				return mcreconcile.Result{}, err // the cluster left the fleet: dropped, not retried
			}
			cm := &corev1.ConfigMap{}
			if err := cl.GetClient().Get(ctx, req.NamespacedName, cm); err != nil {
				return mcreconcile.Result{}, client.IgnoreNotFound(err)
			}
			ctrl.LoggerFrom(ctx).Info("reconciled ConfigMap", "keys", len(cm.Data))
			return mcreconcile.Result{}, nil
		}))
	if err != nil {
		log.Error(err, "setting up the controller")
		os.Exit(1)
	}

	log.Info("starting", "namespace", namespace)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "running the manager")
		os.Exit(1)
	}
}

// end-snippet
