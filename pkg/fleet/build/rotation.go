package build

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// A kubeconfig says two things about a cluster: where it is (the server, the
// CA that authenticates it, the TLS server name, the proxy in between) and
// who the controller is there (a bearer token, a client certificate, basic
// credentials). Short-lived credentials change the second every few minutes
// to every hour; rebuilding a cluster for that would relist every informer
// of the member and reconcile every object again. So Members hashes only the
// where part to decide whether a cluster is rebuilt, and swaps the who part
// into the running cluster's transport (a credentials holder), which every
// request reads.

// Credentials is the "who" of a rest.Config: what Members can change in a
// running cluster without building it again.
type Credentials struct {
	BearerToken string
	// Username and Password: basic credentials.
	Username, Password string
	// CertData and KeyData: a client certificate and its key, PEM-encoded.
	CertData, KeyData []byte
}

// kind names which credentials are set: a change of kind (a token replaced
// by a certificate, say) changes how client-go builds the transport, so it
// rebuilds the cluster.
func (c Credentials) kind() string {
	var k []string
	if c.BearerToken != "" {
		k = append(k, "token")
	}
	if c.Username != "" || c.Password != "" {
		k = append(k, "basic")
	}
	if c.HasCert() {
		k = append(k, "cert")
	}
	return strings.Join(k, "+")
}

func (c Credentials) HasCert() bool { return len(c.CertData) > 0 || len(c.KeyData) > 0 }

// validCertificate reports whether who's client certificate and key, if
// any, make a pair: one that does not is not rotated in place (the cluster is
// rebuilt, and client-go's error reported, as for any bad config).
func validCertificate(who Credentials) bool {
	if !who.HasCert() {
		return true
	}
	_, err := tls.X509KeyPair(who.CertData, who.KeyData)
	return err == nil
}

// SplitCredentials splits cfg into where (a copy of cfg without the
// credentials of Credentials) and who (those credentials). Everything that
// decides which endpoint is reached and trusted — Host, APIPath, the CA, the
// TLS server name, Insecure, the proxy — and every file reference
// (BearerTokenFile, CertFile, KeyFile: client-go reads those itself), exec
// plugin or auth-provider stays in where.
func SplitCredentials(cfg *rest.Config) (where *rest.Config, who Credentials) {
	where = rest.CopyConfig(cfg)
	who = Credentials{
		BearerToken: where.BearerToken, Username: where.Username, Password: where.Password,
		CertData: where.CertData, KeyData: where.KeyData,
	}
	where.BearerToken, where.Username, where.Password = "", "", ""
	where.CertData, where.KeyData = nil, nil
	return where, who
}

// withCredentials returns a copy of where that authenticates with who.
func withCredentials(where *rest.Config, who Credentials) *rest.Config {
	c := rest.CopyConfig(where)
	c.BearerToken, c.Username, c.Password = who.BearerToken, who.Username, who.Password
	c.CertData, c.KeyData = who.CertData, who.KeyData
	return c
}

// endpointHash hashes where and the kind of who: two configs with the same
// hash reach the same server, trust it the same way and differ at most in
// the values of their credentials. ok is false when where holds something
// whose effect cannot be read (a custom transport, dialer or wrapper), or
// when who holds a client certificate beside an exec plugin or auth
// provider (which set certificates of their own): such a config is
// identified by its whole content.
func endpointHash(where *rest.Config, who Credentials) (hash string, ok bool) {
	if where.Transport != nil || where.WrapTransport != nil || where.Dial != nil ||
		where.TLSClientConfig.NextProtos != nil {
		return "", false
	}
	if who.HasCert() && (where.ExecProvider != nil || where.AuthProvider != nil) {
		return "", false
	}
	parts := []string{who.kind(), where.Host, where.APIPath, where.ServerName, fmt.Sprint(where.Insecure),
		string(where.CAData), where.CAFile, where.CertFile, where.KeyFile, where.BearerTokenFile,
		where.Impersonate.UserName, where.Impersonate.UID, strings.Join(where.Impersonate.Groups, ","),
		fmt.Sprint(where.Impersonate.Extra), where.UserAgent, fmt.Sprint(where.DisableCompression),
		fmt.Sprint(where.QPS, where.Burst, where.Timeout), where.ContentType, where.AcceptContentTypes}
	if gv := where.GroupVersion; gv != nil {
		parts = append(parts, "gv", gv.String())
	}
	if e := where.ExecProvider; e != nil {
		parts = append(parts, "exec", fmt.Sprintf("%#v", *e))
	}
	if a := where.AuthProvider; a != nil {
		parts = append(parts, "auth-provider", a.Name)
		for _, k := range slices.Sorted(maps.Keys(a.Config)) {
			parts = append(parts, k, a.Config[k])
		}
	}
	if where.Proxy != nil {
		// The proxy is a function (clientcmd's http.ProxyURL for a
		// kubeconfig's proxy-url): what it answers for the server is
		// what it does for this cluster.
		p, ok := proxyOf(where)
		if !ok {
			return "", false
		}
		parts = append(parts, "proxy", p)
	}
	h := hashParts(parts...)
	return hex.EncodeToString(h[:]), true
}

// hashParts hashes parts, each prefixed with its length so that no two lists
// of parts hash alike.
func hashParts(parts ...string) [sha256.Size]byte {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out
}

// Holder holds the Holder of one member for every cluster built
// for it: each request of those clusters reads them, so that Members can
// rotate them in place. A token or basic Holder go into each request's
// Authorization; a client certificate into each new connection (see
// certTransport).
type Holder struct {
	cur atomic.Pointer[credentialState]
	// certs: the holder's client certificate is rotated in place.
	certs bool
}

// credentialState is one generation of a member's credentials.
type credentialState struct {
	who  Credentials
	gen  uint64
	auth string // the Authorization header value, "" for none
}

// NewHolder returns a holder of who; certs says whether who's client
// certificate is rotated in place (else client-go's transport presents the
// one the cluster was built with).
func NewHolder(who Credentials, certs bool) *Holder {
	c := &Holder{certs: certs}
	c.cur.Store(credentialStateOf(who, 1))
	return c
}

func credentialStateOf(who Credentials, gen uint64) *credentialState {
	s := &credentialState{who: who, gen: gen}
	switch {
	case who.BearerToken != "":
		s.auth = "Bearer " + who.BearerToken
	case who.Username != "" || who.Password != "":
		s.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(who.Username+":"+who.Password))
	}
	return s
}

// Set makes every request from now on carry who.
func (c *Holder) Set(who Credentials) {
	for {
		old := c.cur.Load()
		if c.cur.CompareAndSwap(old, credentialStateOf(who, old.gen+1)) {
			return
		}
	}
}

// wrapperFor returns the innermost of the transport wrappers of a cluster
// built from cfg: client-go's own authentication wrappers, outside it, set
// the credentials the cluster was built with; it replaces them with the
// current ones.
func (c *Holder) wrapperFor(cfg *rest.Config) transport.WrapperFunc {
	return func(rt http.RoundTripper) http.RoundTripper {
		t := &credentialsTransport{creds: c, next: rt}
		if c.certs {
			t.certs = newCertTransport(cfg, rt, c.cur.Load())
		}
		return t
	}
}

// credentialsTransport sets a request's Authorization from its holder, and
// sends it through the transport of the holder's client certificate.
type credentialsTransport struct {
	creds *Holder
	next  http.RoundTripper
	certs *certTransport // nil: no certificate rotated in place
}

var (
	_ http.RoundTripper           = &credentialsTransport{}
	_ utilnet.RoundTripperWrapper = &credentialsTransport{}
)

// WrappedRoundTripper lets connGateFor find the shared transport below: the
// current certificate's, for a cluster whose certificate rotates in place.
func (t *credentialsTransport) WrappedRoundTripper() http.RoundTripper {
	if t.certs != nil {
		if g := t.certs.cur.Load(); g != nil {
			return g.rt
		}
	}
	return t.next
}

func (t *credentialsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.creds.cur.Load()
	next := t.next
	if t.certs != nil {
		rt, err := t.certs.forState(s)
		if err != nil {
			return nil, err
		}
		next = rt
	}
	auth := t.trialAuth(req.Context(), s)
	if auth == "" || req.Header.Get("Authorization") == auth {
		return next.RoundTrip(req)
	}
	// A round tripper must not change the caller's request.
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", auth)
	return next.RoundTrip(r)
}

// CloseIdleConnections passes on to the transports below, the current
// certificate's and client-go's (http.Client calls it through every wrapper
// that has it); client-go's is under a wrapper of its cache, which has no
// CloseIdleConnections of its own: utilnet walks through it.
func (t *credentialsTransport) CloseIdleConnections() {
	if t.certs != nil {
		t.certs.closeIdle()
	}
	utilnet.CloseIdleConnectionsFor(t.next)
}

// RotatesWith reports whether cl is a cluster whose requests read creds: a
// rotation of creds reaches it.
func RotatesWith(cl cluster.Cluster, creds *Holder) bool {
	lc, ok := cl.(*lightCluster)
	return ok && lc.current != nil && lc.current.creds == creds
}

// currentConfig keeps a cluster's GetConfig up to date with its holder's
// credentials, copying the config once per rotation.
type currentConfig struct {
	creds *Holder
	mu    sync.Mutex
	gen   uint64
	cfg   *rest.Config
}

func (c *currentConfig) get(built *rest.Config) *rest.Config {
	s := c.creds.cur.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg == nil || c.gen != s.gen {
		c.cfg, c.gen = configWith(built, s), s.gen
	}
	return c.cfg
}

// configWith returns built with the credentials of s: built itself if it
// has them.
func configWith(built *rest.Config, s *credentialState) *rest.Config {
	has := built.BearerToken == s.who.BearerToken && built.Username == s.who.Username &&
		built.Password == s.who.Password && bytes.Equal(built.CertData, s.who.CertData) &&
		bytes.Equal(built.KeyData, s.who.KeyData)
	if has {
		return built
	}
	where, _ := SplitCredentials(built)
	return withCredentials(where, s.who)
}
