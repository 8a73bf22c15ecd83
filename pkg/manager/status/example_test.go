package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
	"github.com/mcruntime/multicluster-runtime/pkg/manager/status"
)

// The status endpoint of an engine that has not started yet: its members
// wait (wanted). The Multi-Cluster Manager serves the same handler at
// /clusters on its metrics listener (mcmanager.WithStatusEndpoint).
func ExampleNewHandler() {
	e := fleet.New(fleet.Options{})
	for _, name := range []string{"eu-1", "us-1", "ap-1"} {
		e.SetMember(fleet.Member{Name: name, Hash: "1", Build: func(context.Context) (cluster.Cluster, error) {
			return nil, fmt.Errorf("not built: the engine does not run")
		}})
	}
	e.SetPaused("us-1", true)
	srv := httptest.NewServer(status.NewHandler(e, status.Options{}))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/clusters?limit=2")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	var page status.List
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range page.Clusters {
		fmt.Printf("%s %s paused=%t\n", c.Name, c.State, c.Paused)
	}
	fmt.Printf("%d of %d, continue after %q\n", len(page.Clusters), page.Total, page.Continue)
	// Output:
	// ap-1 wanted paused=false
	// eu-1 wanted paused=false
	// 2 of 3, continue after "eu-1"
}
