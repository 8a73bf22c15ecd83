package clusterinventoryapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/internal/mctest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
)

// With the reference plugin on real members: a profile supplies the
// -service-account argument the configuration lacks. It engages only where
// the access provider appends profile arguments.
func TestProfileSourcedArgsReachThePluginOnlyWhenAppended(t *testing.T) {
	appends := pluginProvider(t, "appends")
	appends.ProfileSourcedCLIArgsPolicy = clusterinventoryapi.CLIArgsAppend
	ignores := pluginProvider(t, "ignores")
	e := start(t, clusterinventoryapi.Options{AccessProviders: []clusterinventoryapi.AccessProvider{appends, ignores}})
	for name, ap := range map[string]string{"appended": "appends", "ignored": "ignores"} {
		c := memberCluster(t, 1, 0)
		c.Extensions = append(c.Extensions, clientcmdv1.NamedExtension{
			Name: clusterinventoryapi.ExtensionAdditionalArgs, Extension: runtime.RawExtension{Raw: []byte(`{"args":["-service-account=` + saName + `"]}`)},
		})
		e.createRaw(t, name, ap, c)
	}
	engaged := mctest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{e.ns + "/appended": 1})
	if user := whoAmI(t, engaged[e.ns+"/appended"]); user != saUser {
		t.Errorf("authenticates as %q, want %q", user, saUser)
	}
	ctx := context.Background()
	mctest.Eventually(t, time.Minute, func() error {
		var events eventsv1.EventList
		if err := e.hub.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		if !hasWarning(events.Items, "ignored", clusterinventoryapi.ReasonEngageFailed) {
			return fmt.Errorf("no %s Event on the profile whose arguments were ignored", clusterinventoryapi.ReasonEngageFailed)
		}
		return nil
	})
	if _, ok := e.tracker.Engaged()[e.ns+"/ignored"]; ok {
		t.Error("the profile's arguments reached a plugin whose policy ignores them")
	}
}
