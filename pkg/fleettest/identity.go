package fleettest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// IdentityConfigMap is the ConfigMap MarkMembers creates in namespace
// "default" of every member; its data key "member" holds the member's index.
const IdentityConfigMap = "identity"

// MarkMembers creates the identity ConfigMap in every member, so that a test
// can tell which control plane a client or cluster talks to.
func (f *Fleet) MarkMembers() error {
	for i := range f.Len() {
		c, err := client.New(f.Config(i), client.Options{})
		if err == nil {
			err = c.Create(context.Background(), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: IdentityConfigMap},
				Data:       map[string]string{"member": strconv.Itoa(i)},
			})
		}
		if err != nil {
			return fmt.Errorf("fleettest: marking member %d: %w", i, err)
		}
	}
	return nil
}

// Credentials names a member of a fleet and a kubeconfig for it, for
// ExpectEngagedWith.
type Credentials struct {
	// Member is the index of the control plane the kubeconfig's server is.
	Member int
	// Kubeconfig is the kubeconfig the cluster must be built from.
	Kubeconfig string
}

// UserKubeconfig adds a user of group system:masters to member i and returns
// a kubeconfig for it: two calls with different users give different
// credentials for the same server, as a credential rotation does.
func (f *Fleet) UserKubeconfig(t testing.TB, i int, user string) string {
	t.Helper()
	cfg, err := f.AddUser(i, envtest.User{Name: user, Groups: []string{"system:masters"}})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := KubeconfigFor(cfg, user)
	if err != nil {
		t.Fatal(err)
	}
	return string(kc)
}

// ExpectEngagedWith waits until exactly the clusters of want are engaged,
// each reaching its member's server with the client certificate of its
// kubeconfig, and returns them: a provider's test sees that a cluster was
// built from the kubeconfig it was given, and from the new one after a
// rotation.
func (f *Fleet) ExpectEngagedWith(t testing.TB, tr *Tracker, want map[string]Credentials) map[string]cluster.Cluster {
	t.Helper()
	wantIDs := make(map[string]string, len(want))
	for name, c := range want {
		cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(c.Kubeconfig))
		if err != nil {
			t.Fatalf("kubeconfig for %q: %v", name, err)
		}
		if hostOf(cfg.Host) != hostOf(f.Config(c.Member).Host) {
			t.Fatalf("kubeconfig for %q names %s, not member %d", name, cfg.Host, c.Member)
		}
		wantIDs[name] = identityOf(cfg)
	}
	return expectEngaged(t, tr, want, func(name string, cl cluster.Cluster) error {
		if g := identityOf(cl.GetConfig()); g != wantIDs[name] {
			return fmt.Errorf("%q reaches %s, want %s", name, g, wantIDs[name])
		}
		return nil
	})
}

// hostOf strips a server URL down to host and port.
func hostOf(server string) string {
	return strings.Trim(strings.TrimPrefix(server, "https://"), "/")
}

// identityOf names a server and a client certificate without printing it.
func identityOf(cfg *rest.Config) string {
	sum := sha256.Sum256(cfg.CertData)
	return fmt.Sprintf("%s (certificate %x)", cfg.Host, sum[:6])
}
