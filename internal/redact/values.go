package redact

import (
	"encoding/base64"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// What an error from a member says is untrusted text: a member (or whatever
// answers in its name) may echo back the credentials the controller sent,
// in any wrapping (a header, a query, a JSON field). String removes what it
// recognises by form (URLs' user info and query, Authorization values); the
// credentials of a cluster are also removed by value, wherever they appear:
// Values remembers each cluster's current and recent secrets, and Cluster
// and ClusterErr redact a cluster's text with them.

// MinValue is the shortest secret removed by value: a shorter one (a
// four-letter password, say) would cut words out of every message; it is
// still removed where String recognises it by form.
const MinValue = 6

// MaxRecent bounds the secrets remembered per cluster: the current ones and
// those they replaced (a rotated token still shows in the errors of requests
// sent with it), the oldest forgotten first.
const MaxRecent = 8

// Values is a set of secrets by cluster. The zero value is empty and ready;
// it is safe for concurrent use.
type Values struct {
	mu sync.RWMutex
	by map[string][]secret // oldest first
}

// secret is one secret value and the other forms it takes in text.
type secret []string

// Known is the process' set: the library remembers in it the secrets of
// each cluster's credentials (tokens, passwords) when it is given them, and
// redacts with it what it prints of the cluster's errors.
var Known = &Values{}

// Remember adds secrets of cluster: each value (of MinValue bytes or more)
// with the forms it takes in a query string and in a URL path. A value
// remembered again becomes the most recent.
func (v *Values) Remember(cluster string, secrets ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range secrets {
		if len(s) < MinValue {
			continue
		}
		forms := secret{s}
		for _, f := range []string{url.QueryEscape(s), url.PathEscape(s)} {
			if !slices.Contains(forms, f) {
				forms = append(forms, f)
			}
		}
		if v.by == nil {
			v.by = map[string][]secret{}
		}
		have := slices.DeleteFunc(v.by[cluster], func(o secret) bool { return o[0] == s })
		have = append(have, forms)
		if len(have) > MaxRecent {
			have = slices.Delete(have, 0, len(have)-MaxRecent)
		}
		v.by[cluster] = have
	}
}

// RememberBasic adds the password of Basic credentials, and the header value
// they make (base64 of user:password).
func (v *Values) RememberBasic(cluster, user, password string) {
	if password == "" {
		return
	}
	v.Remember(cluster, password, base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
}

// Forget drops every secret of cluster.
func (v *Values) Forget(cluster string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.by, cluster)
}

// Cluster redacts s as String does, and removes every secret of cluster
// from it, longest first (a secret may hold another).
func (v *Values) Cluster(cluster, s string) string {
	v.mu.RLock()
	var forms []string
	for _, sec := range v.by[cluster] {
		forms = append(forms, sec...)
	}
	v.mu.RUnlock()
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	for _, f := range forms {
		s = strings.ReplaceAll(s, f, Placeholder)
	}
	return String(s)
}

// ClusterErr is Cluster for an error. An error with nothing to redact is
// returned as it is, so that errors.Is and errors.As still work on it;
// otherwise the result does not unwrap to the original error, whose message
// holds what was removed. A nil error stays nil.
func (v *Values) ClusterErr(cluster string, err error) error {
	if err == nil {
		return nil
	}
	orig := err.Error()
	if msg := v.Cluster(cluster, orig); msg != orig {
		return &redactedError{msg: msg}
	}
	return err
}

// RememberConfig adds the secrets of cfg: its bearer token (and the token
// file's content, read now), its Basic password, and the password and query
// values of its server URL and proxy URL. A nil cfg adds nothing.
func (v *Values) RememberConfig(cluster string, cfg *rest.Config) {
	if cfg == nil {
		return
	}
	secrets := []string{cfg.BearerToken}
	if cfg.BearerTokenFile != "" {
		if data, err := os.ReadFile(cfg.BearerTokenFile); err == nil && len(data) <= 64<<10 {
			secrets = append(secrets, strings.TrimSpace(string(data)))
		}
	}
	secrets = append(secrets, urlSecrets(cfg.Host)...)
	v.Remember(cluster, secrets...)
	v.RememberBasic(cluster, cfg.Username, cfg.Password)
}

// urlSecrets returns the password and the query values of raw, a URL.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if p, ok := u.User.Password(); ok {
		out = append(out, p)
	}
	for _, vals := range u.Query() {
		out = append(out, vals...)
	}
	return out
}
