// Command withdep is a program of the upstream design that uses a provider
// module built on upstream's (upstreamdep).
package main

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"example.com/upstreamdep"
)

func main() {
	mgr, err := mcmanager.New(ctrl.GetConfigOrDie(), upstreamdep.New(), mcmanager.Options{})
	fmt.Println(mgr != nil, err)
}
