package kind_test

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/providers/kind"
)

// Upstream's shape of kind.Options.RESTOptions, functions that may fail,
// compiled (issue 41's row); TestRESTOptionsErrorLeavesTheClusterOut runs
// one that fails.
var _ []func(*rest.Config) error = kind.Options{}.RESTOptions

func TestUpstreamRESTOptionsShape(t *testing.T) {
	opts := kind.Options{RESTOptions: []func(*rest.Config) error{func(cfg *rest.Config) error {
		cfg.QPS = 10
		return nil
	}}}
	if p := kind.New(opts); p == nil {
		t.Fatal("kind.New returned nil")
	}
}
