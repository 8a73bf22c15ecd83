// Command v022recorder is a cluster.Cluster of a program written for an
// older controller-runtime (upstream's v0.22): it has GetEventRecorderFor
// only. It does not build against v0.25, on purpose:
// TestV024ErrorsAreOnThePage builds it and looks for the compiler's error on
// the migration page.
package main

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

type fakeCluster struct{}

func (fakeCluster) GetHTTPClient() *http.Client                          { return nil }
func (fakeCluster) GetConfig() *rest.Config                              { return nil }
func (fakeCluster) GetCache() cache.Cache                                { return nil }
func (fakeCluster) GetScheme() *runtime.Scheme                           { return nil }
func (fakeCluster) GetClient() client.Client                             { return nil }
func (fakeCluster) GetFieldIndexer() client.FieldIndexer                 { return nil }
func (fakeCluster) GetEventRecorderFor(name string) record.EventRecorder { return nil }
func (fakeCluster) GetRESTMapper() meta.RESTMapper                       { return nil }
func (fakeCluster) GetAPIReader() client.Reader                          { return nil }
func (fakeCluster) Start(ctx context.Context) error                      { return nil }

func main() {
	var _ cluster.Cluster = fakeCluster{}
}
