package manager

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// scopedManager is the host manager with the cluster methods of a member:
// components built on it read and write the member, and run with the host.
type scopedManager struct {
	manager.Manager
	cl cluster.Cluster
}

var _ manager.Manager = &scopedManager{}

func (s *scopedManager) GetHTTPClient() *http.Client          { return s.cl.GetHTTPClient() }
func (s *scopedManager) GetConfig() *rest.Config              { return s.cl.GetConfig() }
func (s *scopedManager) GetCache() cache.Cache                { return s.cl.GetCache() }
func (s *scopedManager) GetScheme() *runtime.Scheme           { return s.cl.GetScheme() }
func (s *scopedManager) GetClient() client.Client             { return s.cl.GetClient() }
func (s *scopedManager) GetFieldIndexer() client.FieldIndexer { return s.cl.GetFieldIndexer() }
func (s *scopedManager) GetRESTMapper() meta.RESTMapper       { return s.cl.GetRESTMapper() }
func (s *scopedManager) GetAPIReader() client.Reader          { return s.cl.GetAPIReader() }
func (s *scopedManager) GetEventRecorderFor(name string) record.EventRecorder {
	//lint:ignore SA1019 manager.Manager still requires the old API; this only delegates it.
	return s.cl.GetEventRecorderFor(name)
}
func (s *scopedManager) GetEventRecorder(name string) recorder.EventRecorder {
	return s.cl.GetEventRecorder(name)
}
