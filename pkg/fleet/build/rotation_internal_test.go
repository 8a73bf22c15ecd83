package build

import (
	"net/http"
	"net/url"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Only the values of the credentials may change for a rotation in place:
// anything that changes which endpoint is reached or trusted, or how the
// controller authenticates, changes the endpoint's hash.
func TestEndpointHashSeparatesWhereFromWho(t *testing.T) {
	base := func() *rest.Config {
		return &rest.Config{Host: "https://member.example:6443", BearerToken: "one",
			TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	}
	hash := func(cfg *rest.Config) (string, bool) {
		where, who := SplitCredentials(cfg)
		if where.BearerToken != "" || where.Username != "" || where.Password != "" || where.CertData != nil || where.KeyData != nil {
			t.Fatalf("SplitCredentials left credentials in where: %+v", where)
		}
		if who.BearerToken != cfg.BearerToken || who.Username != cfg.Username || who.Password != cfg.Password {
			t.Fatalf("SplitCredentials lost credentials: %+v", who)
		}
		return endpointHash(where, who)
	}
	want, ok := hash(base())
	if !ok {
		t.Fatal("a token config has no endpoint hash")
	}
	same := map[string]func(*rest.Config){
		"another token": func(c *rest.Config) { c.BearerToken = "two" },
	}
	// A client certificate rotates in place too: certificates of one kind
	// share a hash, apart from the token's.
	cert := func(c *rest.Config, pem string) {
		c.BearerToken, c.CertData, c.KeyData = "", []byte(pem), []byte("key "+pem)
	}
	withCert := base()
	cert(withCert, "one")
	wantCert, ok := hash(withCert)
	if !ok || wantCert == want {
		t.Fatalf("a certificate config: endpoint hash %v (%q), want one of its own", ok, wantCert)
	}
	another := base()
	cert(another, "two")
	if got, ok := hash(another); !ok || got != wantCert {
		t.Error("another client certificate changed the endpoint hash")
	}
	for name, change := range same {
		c := base()
		change(c)
		if got, ok := hash(c); !ok || got != want {
			t.Errorf("%s changed the endpoint hash", name)
		}
	}
	differ := map[string]func(*rest.Config){
		"another server":          func(c *rest.Config) { c.Host = "https://other.example:6443" },
		"another CA":              func(c *rest.Config) { c.CAData = []byte("other ca") },
		"a TLS server name":       func(c *rest.Config) { c.ServerName = "elsewhere" },
		"insecure":                func(c *rest.Config) { c.Insecure = true },
		"a proxy":                 func(c *rest.Config) { c.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy:3128"}) },
		"basic instead of token":  func(c *rest.Config) { c.BearerToken, c.Username, c.Password = "", "u", "p" },
		"impersonation":           func(c *rest.Config) { c.Impersonate.UserName = "someone" },
		"an API path":             func(c *rest.Config) { c.APIPath = "/k8s" },
		"a token file":            func(c *rest.Config) { c.BearerTokenFile = "/var/run/token" },
		"no credentials":          func(c *rest.Config) { c.BearerToken = "" },
		"another proxy (via URL)": func(c *rest.Config) { c.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: "other:3128"}) },
	}
	seen := map[string]string{want: "the base"}
	for name, change := range differ {
		c := base()
		change(c)
		got, ok := hash(c)
		if !ok {
			t.Errorf("%s: no endpoint hash", name)
			continue
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s has the endpoint hash of %s", name, other)
		}
		seen[got] = name
	}
	// What cannot be swapped in place or read identifies a config by its
	// whole content: it is rebuilt on every change.
	for name, change := range map[string]func(*rest.Config){
		"a client certificate beside an exec plugin": func(c *rest.Config) {
			c.BearerToken, c.CertData, c.KeyData = "", []byte("cert"), []byte("key")
			c.ExecProvider = &clientcmdapi.ExecConfig{Command: "get-credentials"}
		},
		"a custom wrapper": func(c *rest.Config) { c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return rt } },
	} {
		c := base()
		change(c)
		if _, ok := hash(c); ok {
			t.Errorf("%s: an endpoint hash, want none", name)
		}
	}
}

// A proxy function that sends the server's requests direct (nil, as
// http.ProxyFromEnvironment answers without proxy variables) is read as no
// proxy, not dereferenced: Set of such a config crashed the provider.
func TestEndpointHashOfAProxyThatAnswersNone(t *testing.T) {
	direct := &rest.Config{Host: "https://member.example:6443", BearerToken: "one",
		Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }}
	viaProxy := rest.CopyConfig(direct)
	viaProxy.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.example:3128"})
	hd, okd := endpointHash(SplitCredentials(direct))
	hp, okp := endpointHash(SplitCredentials(viaProxy))
	if !okd || !okp || hd == hp {
		t.Fatalf("endpoint hashes of a direct and a proxied config: %q (%v), %q (%v); want two different ones", hd, okd, hp, okp)
	}
	if changed := endpointChanges(direct, viaProxy); len(changed) != 1 || changed[0] != "Proxy" {
		t.Fatalf("changing a direct proxy function for a proxy: changes %v, want [Proxy]", changed)
	}
}
