package clusterinventoryapi_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcruntime/multicluster-runtime/pkg/fleettest"
	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
	clusterinventoryapi "github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api"
	"github.com/mcruntime/multicluster-runtime/providers/cluster-inventory-api/apis/v1alpha1"
)

// attacker is what a profile writer controls on loopback: an HTTP proxy that
// answers CONNECT and terminates TLS with a certificate of its own, and an
// HTTPS server posing as an API server. Both count the credentials that
// reach them.
type attacker struct {
	proxy  net.Listener
	server *httptest.Server
	tokens atomic.Int64
	conns  sync.WaitGroup
}

func newAttacker(t *testing.T) *attacker {
	t.Helper()
	a := &attacker{}
	a.server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			a.tokens.Add(1)
		}
		http.Error(w, "captured", http.StatusInternalServerError)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.proxy = l
	cert := a.server.TLS.Certificates
	a.conns.Add(1)
	go func() {
		defer a.conns.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			a.conns.Add(1)
			go func() {
				defer a.conns.Done()
				a.intercept(c, cert)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		a.server.Close()
		a.conns.Wait()
	})
	return a
}

// intercept answers a CONNECT, then reads the tunnelled request as the
// server would, counting it if it carries credentials.
func (a *attacker) intercept(c net.Conn, certs []tls.Certificate) {
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Header.Get("Authorization") != "" || req.Header.Get("Proxy-Authorization") != "" {
		a.tokens.Add(1)
	}
	if req.Method != http.MethodConnect {
		_, _ = fmt.Fprint(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	_, _ = fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	tc := tls.Server(c, &tls.Config{Certificates: certs, NextProtos: []string{"http/1.1"}})
	in, err := http.ReadRequest(bufio.NewReader(tc))
	if err != nil {
		return
	}
	if in.Header.Get("Authorization") != "" {
		a.tokens.Add(1)
	}
	_, _ = fmt.Fprint(tc, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
}

// TestProfilesCannotSteerCredentials writes the profiles an attacker who can
// write ClusterProfile status would: a real member's server reached through
// the attacker's proxy (with insecure-skip-tls-verify, or a CA the attacker
// controls, or a tls-server-name of the attacker's certificate), and a
// server on loopback the operator never configured. No credential may reach
// the attacker, every profile is refused with an Event naming it, and a
// legitimate profile beside them engages.
func TestProfilesCannotSteerCredentials(t *testing.T) {
	a := newAttacker(t)
	proxyURL := "http://" + a.proxy.Addr().String()
	attackerCA := a.server.Certificate().Raw
	attackerCAPEM := pemCert(attackerCA)

	// A plugin that mints a token for any server it is handed, as a plugin
	// that does not check servers itself would.
	const planted = "planted-token-never-sent"
	blind := clusterinventoryapi.AccessProvider{Name: "blind", ExecConfig: echo("client.authentication.k8s.io/v1",
		`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"`+planted+`"}}`)}
	e := start(t, clusterinventoryapi.Options{AccessProviders: []clusterinventoryapi.AccessProvider{
		pluginProvider(t, "sa-token", "-service-account="+saName), restrictToMembers(blind),
	}})

	member := func(m int) clientcmdv1.Cluster { return memberCluster(t, m, 0) }
	hostile := map[string]clientcmdv1.Cluster{}
	c := member(1)
	c.ProxyURL, c.InsecureSkipTLSVerify, c.CertificateAuthorityData = proxyURL, true, nil
	hostile["proxy-insecure"] = c
	c = member(1)
	c.ProxyURL, c.CertificateAuthorityData = proxyURL, attackerCAPEM
	hostile["proxy-own-ca"] = c
	c = member(2)
	c.ProxyURL, c.CertificateAuthorityData, c.TLSServerName = proxyURL, attackerCAPEM, "example.com"
	hostile["proxy-server-name"] = c
	c = member(1)
	c.Server, c.CertificateAuthorityData = a.server.URL, attackerCAPEM
	hostile["loopback-server"] = c
	c = member(1)
	c.Server, c.CertificateAuthorityData = fleet.Config(0).Host, fleet.Config(0).CAData
	hostile["hub-server"] = c

	for name, cluster := range hostile {
		for _, ap := range []string{"sa-token", "blind"} {
			e.createRaw(t, name+"-"+ap, ap, cluster)
		}
	}
	e.create(t, profile{name: "good", member: 2, healthy: true, providers: []string{"sa-token"}})
	good := e.ns + "/good"
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{good: 2})

	defer func() { // also when a wait below fails
		t.Logf("credentials that reached the attacker: %d", a.tokens.Load())
		if n := a.tokens.Load(); n != 0 {
			t.Errorf("%d credentials reached the attacker", n)
		}
	}()
	ctx := context.Background()
	var events eventsv1.EventList
	fleettest.Eventually(t, time.Minute, func() error {
		if err := e.hub.List(ctx, &events, client.InNamespace(e.ns)); err != nil {
			return err
		}
		for name := range hostile {
			for _, ap := range []string{"sa-token", "blind"} {
				if !hasWarning(events.Items, name+"-"+ap, clusterinventoryapi.ReasonInvalidProfile) {
					return fmt.Errorf("no %s Warning Event on %s-%s", clusterinventoryapi.ReasonInvalidProfile, name, ap)
				}
			}
		}
		return nil
	})
	// The hostile profiles were refused before any cluster was built for
	// them: only the good one is engaged, so no request is in flight.
	fleettest.ExpectEngaged(t, e.tracker, map[multicluster.ClusterName]int{good: 2})
	for _, ev := range events.Items {
		if ev.Type == "Normal" && ev.Regarding.Name != "good" {
			t.Errorf("hostile profile %s got a %s Event: %s", ev.Regarding.Name, ev.Reason, ev.Note)
		}
	}
	if logs := e.logs.String(); strings.Contains(logs, planted) || strings.Contains(logs, "eyJ") {
		t.Error("a token appears in the logs")
	}
}

// pemCert encodes a DER certificate as PEM.
func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// createRaw creates a healthy profile offering the access provider ap with
// the cluster entry c.
func (e *env) createRaw(t testing.TB, name, ap string, c clientcmdv1.Cluster) *v1alpha1.ClusterProfile {
	t.Helper()
	cp := e.create(t, profile{name: name, healthy: true})
	cp.Status.AccessProviders = []v1alpha1.AccessProvider{{Name: ap, Cluster: c}}
	if err := e.hub.Status().Update(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
	return cp
}

// restrictToMembers limits where ap's credentials may go to the servers of
// members 1 and 2.
func restrictToMembers(ap clusterinventoryapi.AccessProvider) clusterinventoryapi.AccessProvider {
	ap.AllowedServers = memberServers()
	return ap
}

// memberServers are the host:port of members 1 and 2.
func memberServers() []string {
	var hosts []string
	for _, m := range []int{1, 2} {
		u, err := url.Parse(fleet.Config(m).Host)
		if err != nil {
			panic(err)
		}
		hosts = append(hosts, u.Host)
	}
	return hosts
}
