// Command registry keeps a registry of the clusters the manager engages and
// logs their names whenever they change, as the upstream design's registry
// example does. The fleet is a set of kubeconfig files.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr/funcr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	"github.com/mcruntime/multicluster-runtime/providers/file"
)

func main() {
	var dir string
	flag.StringVar(&dir, "kubeconfig-dir", "", "directory of kubeconfig files")
	flag.Parse()
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}))
	entryLog := ctrllog.Log.WithName("entrypoint")
	ctx := ctrl.SetupSignalHandler()

	provider, err := file.New(file.Options{KubeconfigDirs: []string{dir}})
	if err != nil {
		entryLog.Error(err, "unable to create provider")
		os.Exit(1)
	}
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), provider, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		entryLog.Error(err, "unable to create manager")
		os.Exit(1)
	}
	registry := clusters.NewRegistry[cluster.Cluster]()
	registry.EqualClusters = clusters.EqualClusters[cluster.Cluster]
	if err := mgr.Add(registry); err != nil { // engaged with every cluster, as controllers are
		entryLog.Error(err, "unable to add registry")
		os.Exit(1)
	}
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		var last []multicluster.ClusterName
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if names := registry.ClusterNames(); !slices.Equal(names, last) {
				var hosts []string
				_ = registry.ForEach(func(name multicluster.ClusterName, cl cluster.Cluster) error {
					hosts = append(hosts, fmt.Sprintf("%s=%s", name, cl.GetConfig().Host))
					return nil
				})
				entryLog.Info("Engaged clusters", "names", fmt.Sprint(names), "hosts", strings.Join(hosts, ","))
				last = names
			}
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
	}))
	if err != nil {
		entryLog.Error(err, "unable to add reporter")
		os.Exit(1)
	}
	if err := mgr.Start(ctx); err != nil {
		entryLog.Error(err, "unable to run manager")
		os.Exit(1)
	}
}
