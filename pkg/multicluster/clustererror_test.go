package multicluster_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// listErr is a multi-error of a type that == cannot compare (a slice).
type listErr []error

func (l listErr) Error() string   { return errors.Join(l...).Error() }
func (l listErr) Unwrap() []error { return l }

func TestWithClusterNamesOnce(t *testing.T) {
	base := errors.New("base")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"plain", base, `cluster "a": base`},
		{"named already", multicluster.WithCluster("a", base), `cluster "a": base`},
		{"named twice", &multicluster.ClusterError{Cluster: "a", Err: multicluster.WithCluster("a", base)}, `cluster "a": base`},
		{"another cluster", multicluster.WithCluster("b", base), `cluster "a": cluster "b": base`},
		{"joined", errors.Join(multicluster.WithCluster("a", base), errors.New("other")), "cluster \"a\": base\nother"},
		{"non-comparable", listErr{multicluster.WithCluster("a", base)}, `cluster "a": base`},
		{"non-comparable, unchanged", listErr{base}, `cluster "a": base`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := multicluster.WithCluster("a", tc.err)
			if err.Error() != tc.want {
				t.Errorf("got %q, want %q", err.Error(), tc.want)
			}
			if strings.Count(err.Error(), `"a"`) != 1 {
				t.Errorf("names the cluster %d times: %q", strings.Count(err.Error(), `"a"`), err)
			}
			if !errors.Is(err, base) {
				t.Errorf("errors.Is(%q, base) is false", err)
			}
			var ce *multicluster.ClusterError
			if !errors.As(err, &ce) || ce.Cluster != "a" {
				t.Errorf("not a *ClusterError for a: %#v", err)
			}
		})
	}
	if multicluster.WithCluster("a", nil) != nil {
		t.Error("WithCluster of nil is not nil")
	}
}

// A layer that names the cluster does not name it again when what it wraps
// already does, as a controller's Engage error under the fleet engine.
func ExampleWithCluster() {
	fromController := multicluster.WithCluster("east", errors.New(`controller "c": listing *v1.ConfigMap keeps failing`))
	fmt.Println(multicluster.WithCluster("east", fromController))
	// Output: cluster "east": controller "c": listing *v1.ConfigMap keeps failing
}
