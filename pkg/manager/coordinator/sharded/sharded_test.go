package sharded_test

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/mcruntime/multicluster-runtime/pkg/manager/coordinator/sharded"
)

func TestOptionsMapOntoSharding(t *testing.T) {
	c := sharded.New(nil, funcr.New(func(string, string) {}, funcr.Options{}),
		sharded.WithShardLease("fleet-system", "shards"),
		sharded.WithPerClusterLease(true),
		sharded.WithPeerWeight(3),
		sharded.WithLeaseTimings(20*time.Second, 12*time.Second, 3*time.Second))
	opts, err := c.ShardingOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Namespace != "fleet-system" || opts.Name != "shards" || opts.Weight != 3 ||
		opts.LeaseDuration != 20*time.Second || opts.RenewDeadline != 12*time.Second || opts.RetryPeriod != 3*time.Second {
		t.Fatalf("sharding options: %+v", opts)
	}
	if opts.Logger == nil {
		t.Fatal("the logger given to New is not the coordinator's")
	}
}

func TestOptionsThatCannotBeHonouredAreRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		opt  sharded.Option
		want string
	}{
		"no per-cluster lease": {sharded.WithPerClusterLease(false), "WithPerClusterLease(false) is not supported"},
		"intervals":            {sharded.WithSynchronizationIntervals(time.Second, time.Minute), "use WithLeaseTimings"},
		"sharder":              {sharded.WithSharder(struct{}{}), "use WithPeerWeight"},
		"peer registry":        {sharded.WithPeerRegistry(struct{}{}), "replica Leases"},
		"weight 0":             {sharded.WithPeerWeight(0), "stop it instead"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sharded.New(nil, logr.Discard(), tc.opt).ShardingOptions()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ShardingOptions: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
