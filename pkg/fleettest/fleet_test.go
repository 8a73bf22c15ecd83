package fleettest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

// shared is the fleet of TestMain; tests only read from it or create objects
// with names of their own.
var shared *fleettest.Fleet

func TestMain(m *testing.M) {
	// Outside `make test`, provision the binaries the way the repository does.
	testbed.MustProvideAssets()
	fleettest.RunMainWithOptions(m, 2, fleettest.Options{}, func(f *fleettest.Fleet) error {
		shared = f
		return f.MarkMembers()
	})
}

func TestTwoControlPlanesAreIndependent(t *testing.T) {
	f := shared
	ctx := context.Background()

	a, err := client.New(f.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.New(f.Config(1), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: testbed.Name("only-in-member-0")}}
	if err := a.Create(ctx, cm); err != nil {
		t.Fatalf("create in member 0: %v", err)
	}
	if err := a.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("member 0 does not serve its own object: %v", err)
	}
	err = b.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("member 1 should not see member 0's object, got err=%v", err)
	}
}

func TestStopMemberMakesItUnreachable(t *testing.T) {
	f := fleettest.New(t, 1)
	c, err := client.New(f.Config(0), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.StopMember(0); err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &corev1.NamespaceList{}); err == nil {
		t.Fatal("a stopped member still answered")
	}
}

func TestWriteKubeconfigReachesTheMember(t *testing.T) {
	path := filepath.Join(t.TempDir(), "member-1.kubeconfig")
	if err := shared.WriteKubeconfig(1, path, "member-1"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig file: %v, mode %v; want 0600", err, st.Mode().Perm())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: fleettest.IdentityConfigMap}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["member"] != "1" {
		t.Fatalf("the kubeconfig of member 1 reaches member %q", cm.Data["member"])
	}
}

func TestStartWithoutBinariesNamesTheDirectory(t *testing.T) {
	dir := t.TempDir()
	_, err := fleettest.Start(1, fleettest.Options{BinaryAssetsDirectory: dir})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "KUBEBUILDER_ASSETS") {
		t.Fatalf("want an error naming %s and KUBEBUILDER_ASSETS, got %v", dir, err)
	}
}
