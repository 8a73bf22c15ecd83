package fleetreader_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleetreader"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	mcmanager "github.com/mcruntime/multicluster-runtime/pkg/manager"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/sharding"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// Two sharded replicas share six clusters: each reads exactly its own
// shard, and together they read the whole fleet, each cluster once.
func TestShardedReplicasReadOnlyTheirShard(t *testing.T) {
	ns := seed(t, "sharded", "1/a", "2/c")
	cfgs := map[multicluster.ClusterName]*rest.Config{}
	for i := 1; i <= 2; i++ {
		for j := range 3 {
			cfgs[fmt.Sprintf("s%d-%d", i, j)] = members.Config(i)
		}
	}
	var all []string
	for name := range cfgs {
		all = append(all, name)
	}
	slices.Sort(all)

	readers := map[string]*fleetreader.Reader{}
	for _, replica := range []string{"r1", "r2"} {
		_, r := newReader(t, cfgs, mcmanager.WithSharding(sharding.Options{
			Namespace: "default", Name: "fleetreader-test", Identity: replica,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
		}))
		readers[replica] = r
	}

	fleettest.Eventually(t, time.Minute, func() error {
		var union []string
		for replica, r := range readers {
			clusters := r.Clusters()
			if len(clusters) == 0 {
				return fmt.Errorf("%s reads no cluster", replica)
			}
			entries, err := fleetreader.List[*corev1.ConfigMap](context.Background(), r, client.InNamespace(ns))
			if err != nil {
				return err
			}
			// Each cluster of its shard, and only those, contributes its one object.
			var from []string
			for _, e := range entries {
				from = append(from, e.Cluster)
			}
			if !slices.Equal(from, clusters) {
				return fmt.Errorf("%s reads clusters %v but listed objects of %v", replica, clusters, from)
			}
			union = append(union, clusters...)
		}
		slices.Sort(union)
		if !slices.Equal(union, all) {
			return fmt.Errorf("the replicas read %s together, want each of %s once", strings.Join(union, " "), strings.Join(all, " "))
		}
		return nil
	})
	for replica, r := range readers {
		t.Logf("%s reads %v", replica, r.Clusters())
	}
}
