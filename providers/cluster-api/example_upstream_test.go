package capi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// The upstream design's cluster-api program (examples/upstream), built and
// run as a process against the host as a user runs it: a provisioned Cluster
// with its kubeconfig Secret on the host is engaged, and a ConfigMap of the
// member it describes is reconciled, with ListClusters counting it.
func TestUpstreamCAPIExample(t *testing.T) {
	e := newEnv(t, 0)
	bin := filepath.Join(t.TempDir(), "capi-example")
	if err := testbed.BuildProgram("./examples/upstream", bin); err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(t.TempDir(), "host.kubeconfig")
	if err := fleet.WriteKubeconfig(0, host, "host"); err != nil {
		t.Fatal(err)
	}
	out := testbed.RunProgram(t, bin, []string{"KUBECONFIG=" + host})

	e.create(t, e.secret("upstream", kubeconfig(t, 1, "capi-upstream-example")))
	e.cluster(t, "upstream", true, nil)
	member := testbed.NewClient(t, fleet.Config(1))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello-capi"}}
	if err := member.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = member.Delete(context.Background(), cm) })

	// Clusters of earlier tests may still be on the host (envtest deletes no
	// namespace's content): ListClusters counts this one among them.
	found := regexp.MustCompile(`"msg"="ConfigMap found".*"cluster"="` + regexp.QuoteMeta(e.name("upstream")) +
		`".*"name"="hello-capi".*"clusters"=(\d+)`)
	fleettest.Eventually(t, time.Minute, func() error {
		m := found.FindStringSubmatch(out.String())
		if m == nil {
			return fmt.Errorf("the example has not reconciled default/hello-capi in cluster %s yet; it printed:\n%s", e.name("upstream"), out)
		}
		if n, _ := strconv.Atoi(m[1]); n < 1 {
			return fmt.Errorf("the example reconciled in cluster %s while ListClusters listed %d clusters", e.name("upstream"), n)
		}
		return nil
	})
}
