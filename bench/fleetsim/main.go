// Command fleetsim serves a simulated fleet for the scale benchmarks: N
// members, each on a loopback address of its own (127.1.0.1, 127.1.0.2, ...)
// with a serving certificate and CA of its own, forwarding to one of a few
// real kube-apiservers (envtest's binaries, KUBEBUILDER_ASSETS), over
// connections of its own, with a ServiceAccount token of its own, whose Role
// lets it read ConfigMaps and Deployments in its own namespace and nothing
// else. To a client every member is a different server, trust root and
// identity.
//
// Every member's namespace holds objects of its own: ConfigMaps and
// Deployments whose names, labels and data are drawn from a seeded generator
// (1 to 4 KB of data per ConfigMap, 1.5 to 4 KB per Deployment), carrying
// managed fields as a real fleet's do (created, then changed with
// server-side apply).
//
// What it does not imitate: latency between the controller and a member
// (every member is one loopback hop plus the proxy away), members that differ
// in API discovery (every member serves its API server's, built-in types
// only), members that fail, and the API servers' own load (a few servers carry
// every member's lists and watches, on the same cores as the benchmark).
//
// It writes DIR/fleet.json (the members, their kubeconfigs and namespaces,
// the control URL) and DIR/NAME.kubeconfig per member, then serves until
// -lifetime passes, it is interrupted, or, with -drive, the benchmark rounds
// it drives are done (see drive.go). POST CONTROL/update makes every member's
// first -update ConfigMaps change one value (the writes are the simulator's,
// so their CPU is not counted in the benchmark's).
//
// Only loopback addresses are served; counts and lifetime are bounded.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
)

const (
	maxMembers  = 20000
	maxLifetime = 4 * time.Hour
)

var quietLog = log.New(io.Discard, "", 0)

// Fleet is what DIR/fleet.json holds, for the benchmark side.
type Fleet struct {
	Control     string   `json:"control"`     // base URL of the control endpoint
	Host        string   `json:"host"`        // an administrator's kubeconfig of server 0, for a manager's host
	ConfigMaps  int      `json:"configMaps"`  // per member
	Deployments int      `json:"deployments"` // per member
	Update      int      `json:"update"`      // ConfigMaps changed per member by one update
	Members     []Member `json:"members"`
}

// Member is one member in fleet.json.
type Member struct {
	Name       string `json:"name"`
	Kubeconfig string `json:"kubeconfig"`
	Namespace  string `json:"namespace"`
	Address    string `json:"address"`
}

type options struct {
	members, servers, configMaps, deployments, update int
	seed                                              uint64
	dir                                               string
	lifetime                                          time.Duration
	drive                                             driveOptions
}

func main() {
	var o options
	flag.IntVar(&o.members, "members", 100, fmt.Sprintf("members to serve (at most %d)", maxMembers))
	flag.IntVar(&o.servers, "servers", 1, "real kube-apiservers the members are spread over")
	flag.IntVar(&o.configMaps, "configmaps", 200, "ConfigMaps per member")
	flag.IntVar(&o.deployments, "deployments", 50, "Deployments per member")
	flag.IntVar(&o.update, "update", 20, "ConfigMaps per member that one POST /update changes")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the members' objects")
	flag.StringVar(&o.dir, "dir", "", "directory for fleet.json and the kubeconfigs (default: a temporary one, removed at exit)")
	flag.DurationVar(&o.lifetime, "lifetime", time.Hour, fmt.Sprintf("stop after this long (at most %s)", maxLifetime))
	o.drive.register(flag.CommandLine)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		stop()
		log.Fatal(err)
	}
}

// run serves the fleet until ctx ends or o.lifetime passes (or, with
// -drive, the rounds are done).
func run(ctx context.Context, o options) error {
	if o.members < 1 || o.members > maxMembers || o.servers < 1 || o.servers > 8 || o.lifetime <= 0 || o.lifetime > maxLifetime ||
		o.configMaps < 1 || o.deployments < 0 || o.update > o.configMaps {
		return errors.New("fleetsim: -members 1..20000, -servers 1..8, -lifetime up to 4h, -configmaps ≥ 1, -update ≤ -configmaps")
	}
	ctx, cancel := context.WithTimeout(ctx, o.lifetime)
	defer cancel()

	if o.dir == "" {
		d, err := os.MkdirTemp("", "fleetsim-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		o.dir = d
	} else if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}

	start := time.Now()
	log.Printf("starting %d API server(s)", o.servers)
	servers, err := fleettest.Start(o.servers, fleettest.Options{APIServerFlags: map[string]string{
		// Thousands of members list and watch at once through a few servers.
		"max-requests-inflight":            "8000",
		"max-mutating-requests-inflight":   "4000",
		"http2-max-streams-per-connection": "2000",
	}})
	if err != nil {
		return err
	}
	defer func() {
		if err := servers.Stop(); err != nil {
			log.Printf("stopping the API servers: %v", err)
		}
	}()
	admins := make([]*kubernetes.Clientset, o.servers)
	upstreams := make([]*rest.Config, o.servers)
	for i := range o.servers {
		cfg := servers.Config(i)
		cfg.QPS, cfg.Burst = -1, 0
		cfg.ContentType = "application/vnd.kubernetes.protobuf" // cheaper writes for the server
		if admins[i], err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
		upstreams[i] = cfg
	}
	host, err := fleettest.KubeconfigFor(servers.Config(0), "host")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.dir, "host.kubeconfig"), host, 0o600); err != nil {
		return err
	}

	members := make([]*member, o.members)
	for i := range members {
		members[i] = &member{index: i, name: fmt.Sprintf("m%05d", i), namespace: fmt.Sprintf("team-%05d", i), server: i % o.servers}
	}
	log.Printf("creating %d identities, certificates and listeners", o.members)
	if err := each(ctx, o.members, 16, func(i int) error {
		m := members[i]
		if err := createIdentity(ctx, admins[m.server], m, o.lifetime); err != nil {
			return err
		}
		ca, cert, err := newMemberTLS(m.name, memberIP(i), o.lifetime)
		if err != nil {
			return err
		}
		m.caPEM = ca
		// A proxy, so a transport, per member: each member's requests
		// travel over connections of its own to the API server, as a real
		// member's to its own server. One transport for all members put
		// every member's lists and watches on one HTTP/2 connection, read
		// by one goroutine of this process and written by one of the API
		// server's, behind which a member's discovery could wait.
		proxy, err := upstream(upstreams[m.server])
		if err != nil {
			return err
		}
		if err := m.serve(cert, proxy); err != nil {
			return err
		}
		return writeKubeconfig(filepath.Join(o.dir, m.name+".kubeconfig"), m)
	}); err != nil {
		return err
	}
	defer func() {
		for _, m := range members {
			if m.srv != nil {
				_ = m.srv.Close()
			}
		}
	}()
	log.Printf("seeding %d ConfigMaps and %d Deployments per member", o.configMaps, o.deployments)
	per := o.configMaps + o.deployments
	var written atomic.Int64
	if err := each(ctx, o.members*per, 32, func(j int) error {
		m, k := members[j/per], j%per
		err := retry(ctx, func() error { return createObject(ctx, admins[m.server], o.seed, m, k, o.configMaps) })
		if n := written.Add(1); n%20000 == 0 {
			log.Printf("  %d objects written", n)
		}
		return err
	}); err != nil {
		return err
	}

	ctl, ctlURL, err := control(ctx, o, admins, members)
	if err != nil {
		return err
	}
	defer ctl.Close()
	fleet := Fleet{Control: ctlURL, Host: filepath.Join(o.dir, "host.kubeconfig"), ConfigMaps: o.configMaps, Deployments: o.deployments, Update: o.update}
	for _, m := range members {
		fleet.Members = append(fleet.Members, Member{Name: m.name, Kubeconfig: filepath.Join(o.dir, m.name+".kubeconfig"), Namespace: m.namespace, Address: m.addr})
	}
	body, err := json.MarshalIndent(fleet, "", "  ")
	if err != nil {
		return err
	}
	manifest := filepath.Join(o.dir, "fleet.json")
	if err := os.WriteFile(manifest, body, 0o600); err != nil {
		return err
	}
	log.Printf("serving %d members (%s); set up in %.0fs; fleet: %s", o.members, members[0].addr, time.Since(start).Seconds(), manifest)
	if o.drive.binary != "" {
		return o.drive.run(ctx, manifest, o, admins[0])
	}
	<-ctx.Done()
	log.Printf("stopping: %v", context.Cause(ctx))
	return nil
}

// applyObject applies member m's object k: a ConfigMap below configMaps,
// a Deployment above.
func applyObject(ctx context.Context, cs *kubernetes.Clientset, seed uint64, m *member, k, configMaps int, version string) error {
	opts := metav1.ApplyOptions{FieldManager: "fleetsim", Force: true}
	if k < configMaps {
		_, err := cs.CoreV1().ConfigMaps(m.namespace).Apply(ctx, configMap(seed, m.namespace, m.index, k, version), opts)
		return err
	}
	_, err := cs.AppsV1().Deployments(m.namespace).Apply(ctx, deployment(seed, m.namespace, m.index, k-configMaps), opts)
	return err
}

// createObject creates member m's object k as applyObject would apply it at
// version v0: a create costs the API server less than an apply (no merge),
// and the object still carries managed fields (an Update entry of fleetsim's).
func createObject(ctx context.Context, cs *kubernetes.Clientset, seed uint64, m *member, k, configMaps int) error {
	opts := metav1.CreateOptions{FieldManager: "fleetsim"}
	var err error
	if k < configMaps {
		var cm corev1.ConfigMap
		if err := convert(configMap(seed, m.namespace, m.index, k, "v0"), &cm); err != nil {
			return err
		}
		_, err = cs.CoreV1().ConfigMaps(m.namespace).Create(ctx, &cm, opts)
	} else {
		var d appsv1.Deployment
		if err := convert(deployment(seed, m.namespace, m.index, k-configMaps), &d); err != nil {
			return err
		}
		_, err = cs.AppsV1().Deployments(m.namespace).Create(ctx, &d, opts)
	}
	if apierrors.IsAlreadyExists(err) {
		return nil // a retried create that had gone through
	}
	return err
}

// convert turns an apply configuration into the typed object it describes.
func convert(ac, obj any) error {
	body, err := json.Marshal(ac)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, obj)
}

// control serves POST /update on 127.0.0.1: every member's first o.update
// ConfigMaps get a new version value; it answers once all are written.
func control(ctx context.Context, o options, admins []*kubernetes.Clientset, members []*member) (*http.Server, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	var round atomic.Int64
	var mu sync.Mutex // one update at a time
	mux := http.NewServeMux()
	mux.HandleFunc("POST /update", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		version := fmt.Sprintf("v%d", round.Add(1))
		begin := time.Now()
		err := each(r.Context(), len(members)*o.update, 32, func(j int) error {
			m, k := members[j/o.update], j%o.update
			return retry(ctx, func() error { return applyObject(r.Context(), admins[m.server], o.seed, m, k, o.configMaps, version) })
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		log.Printf("update %s: %d ConfigMaps in %.1fs", version, len(members)*o.update, time.Since(begin).Seconds())
		fmt.Fprintf(w, "%d\n", len(members)*o.update)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog}
	go func() { _ = srv.Serve(l) }()
	return srv, "http://" + l.Addr().String(), nil
}

func writeKubeconfig(path string, m *member) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[m.name] = &clientcmdapi.Cluster{Server: "https://" + m.addr, CertificateAuthorityData: m.caPEM}
	cfg.AuthInfos[m.name] = &clientcmdapi.AuthInfo{Token: m.token}
	cfg.Contexts[m.name] = &clientcmdapi.Context{Cluster: m.name, AuthInfo: m.name, Namespace: m.namespace}
	cfg.CurrentContext = m.name
	return clientcmd.WriteToFile(*cfg, path)
}

// each calls f(0..n-1) from workers goroutines and returns the first error.
func each(ctx context.Context, n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && failed.Load() == nil && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				if err := f(i); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return ctx.Err()
}

// retry retries f up to five times: a busy API server drops a write now and
// then.
func retry(ctx context.Context, f func() error) error {
	err := f()
	for attempt := 1; err != nil && attempt < 5 && ctx.Err() == nil; attempt++ {
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		err = f()
	}
	return err
}
