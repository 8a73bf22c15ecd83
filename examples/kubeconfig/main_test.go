package main

import (
	"context"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"

	"github.com/mcruntime/multicluster-runtime/providers/kubeconfig"
)

// fleet is the package's fleet of real control planes.
var fleet *fleettest.Fleet

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	fleettest.RunMain(m, 2, func(f *fleettest.Fleet) { fleet = f })
}

// A labelled Secret on the host holding member 1's kubeconfig makes it a
// cluster named after the Secret.
func TestReconcilesTheClustersOfTheSecrets(t *testing.T) {
	kc, err := fleet.Kubeconfig(1, "member-1")
	if err != nil {
		t.Fatal(err)
	}
	out := testbed.RunExample(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, fleet.Config(0), "default", testbed.ManagerOptions, out)
	})
	testbed.Create(t, fleet.Config(0), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "member-1",
			Labels: map[string]string{kubeconfig.DefaultKubeconfigSecretLabel: "true"}},
		Data: map[string][]byte{kubeconfig.DefaultKubeconfigSecretKey: kc},
	})
	testbed.Create(t, fleet.Config(1), testbed.ConfigMap("default", "hello"))
	testbed.WaitForOutput(t, out, "reconciled cluster://member-1/default/hello")
}
