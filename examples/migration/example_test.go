package migration_test

import (
	"fmt"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcruntime/multicluster-runtime/examples/migration"
	mcreconcile "github.com/mcruntime/multicluster-runtime/pkg/reconcile"
)

// A request of the host (ClusterName "", upstream's Empty()) and one of a
// member, whose name is logged and collected as the string it is (upstream's
// String()).
func ExampleLogRequest() {
	log := funcr.New(func(_, args string) { fmt.Println(args) }, funcr.Options{})
	host := mcreconcile.Request{}
	host.NamespacedName = types.NamespacedName{Namespace: "default", Name: "settings"}
	member := host
	member.ClusterName = "eu-1"

	fmt.Println(migration.LogRequest(log, host))
	fmt.Println(migration.LogRequest(log, member))
	// Output:
	// "level"=0 "msg"="reconciling on the host" "object"="default/settings"
	// []
	// "level"=0 "msg"="reconciling" "cluster"="eu-1"
	// [eu-1]
}
