package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcruntime/multicluster-runtime/internal/testbed"
	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

func TestMain(m *testing.M) {
	testbed.MustProvideAssets()
	goleak.VerifyTestMain(m)
}

// TestMembersAreDistinctServersAndIdentities starts a fleet of three members
// on one real API server and checks what the benchmark relies on: each
// member has an address and a CA of its own (another member's CA does not
// verify it), its token reads its own namespace and is refused another's,
// its objects differ from the other members', and an update changes them.
func TestMembersAreDistinctServersAndIdentities(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{members: 3, servers: 1, configMaps: 3, deployments: 1, update: 1, seed: 7, dir: dir, lifetime: 5 * time.Minute})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	var fleet Fleet
	fleettest.Eventually(t, 3*time.Minute, func() error {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("run ended before serving: %v", err)
		default:
		}
		body, err := os.ReadFile(filepath.Join(dir, "fleet.json"))
		if err != nil {
			return err
		}
		return json.Unmarshal(body, &fleet)
	})
	if len(fleet.Members) != 3 {
		t.Fatalf("fleet.json has %d members, want 3", len(fleet.Members))
	}
	cfgs := make([]*rest.Config, 3)
	clients := make([]*kubernetes.Clientset, 3)
	addrs := map[string]bool{}
	for i, m := range fleet.Members {
		cfg, err := clientcmd.BuildConfigFromFlags("", m.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = cfg
		if clients[i], err = kubernetes.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
		host, _, err := net.SplitHostPort(m.Address)
		if err != nil {
			t.Fatal(err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			t.Errorf("member %s serves on %s, not a loopback address", m.Name, m.Address)
		}
		addrs[host] = true
	}
	if len(addrs) != 3 {
		t.Errorf("members share addresses: %v", addrs)
	}

	names := map[string]string{} // ConfigMap name -> member
	for i, m := range fleet.Members {
		cms, err := clients[i].CoreV1().ConfigMaps(m.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("member %s lists its own ConfigMaps: %v", m.Name, err)
		}
		if len(cms.Items) != 3 {
			t.Errorf("member %s has %d ConfigMaps, want 3", m.Name, len(cms.Items))
		}
		for _, cm := range cms.Items {
			if other, ok := names[cm.Name]; ok {
				t.Errorf("ConfigMap %s in members %s and %s: members' objects should differ", cm.Name, other, m.Name)
			}
			names[cm.Name] = m.Name
			if len(cm.ManagedFields) == 0 {
				t.Errorf("ConfigMap %s/%s carries no managed fields", cm.Namespace, cm.Name)
			}
		}
		deps, err := clients[i].AppsV1().Deployments(m.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil || len(deps.Items) != 1 {
			t.Errorf("member %s lists its Deployments: %d, %v; want 1", m.Name, len(deps.Items), err)
		}
		other := fleet.Members[(i+1)%3]
		if _, err := clients[i].CoreV1().ConfigMaps(other.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("member %s lists %s's namespace: %v, want forbidden", m.Name, other.Name, err)
		}
		if _, err := clients[i].CoreV1().Secrets(m.Namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("member %s lists Secrets in its namespace: %v, want forbidden", m.Name, err)
		}
	}

	// Member 0's CA does not verify member 1's server.
	mixed := rest.CopyConfig(cfgs[1])
	mixed.CAData = cfgs[0].CAData
	cs, err := kubernetes.NewForConfig(mixed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("member 1 reached with member 0's CA: %v, want a certificate error", err)
	}

	first := configMap(7, fleet.Members[2].Namespace, 2, 0, "").GetName()
	resp, err := http.Post(fleet.Control+"/update", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("update: %s", resp.Status)
	}
	cm, err := clients[2].CoreV1().ConfigMaps(fleet.Members[2].Namespace).Get(ctx, *first, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["version"]; got != "v1" {
		t.Errorf("after one update, %s/%s has version %q, want v1", cm.Namespace, cm.Name, got)
	}
	for _, c := range clients {
		c.CoreV1().RESTClient().(*rest.RESTClient).Client.CloseIdleConnections()
	}
	cs.CoreV1().RESTClient().(*rest.RESTClient).Client.CloseIdleConnections()
}
