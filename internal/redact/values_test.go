package redact

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// A member that echoes the credentials it was sent, in whatever wrapping,
// has every form of them removed from what the library prints: the current
// token and the recent ones, by value, in a header, a query (escaped), JSON,
// a Basic header, a URL's user info and query; another cluster's text keeps
// words that happen to be this cluster's secrets only where String removes
// them by form.
func TestValuesRedactEveryFormOfAClustersSecrets(t *testing.T) {
	v := &Values{}
	const token, rotated = "eyJhbGciOi.tok+en/with=odd~chars", "second-token-after-rotation"
	v.RememberConfig("member-1", &rest.Config{
		Host:        "https://admin:hunter2hunter2@10.0.0.1:6443/?token=query-secret-value",
		BearerToken: token,
		Username:    "admin", Password: "basic-password-1",
	})
	v.Remember("member-1", rotated)
	basic := base64.StdEncoding.EncodeToString([]byte("admin:basic-password-1"))

	echo := fmt.Sprintf(`list refused for token %s (header "Bearer %s", query token=%s, JSON {"token":%q}) `+
		`then %s, basic %s, raw %s, url https://10.0.0.1/?x=query-secret-value, password hunter2hunter2 and basic-password-1`,
		token, token, url.QueryEscape(token), token, rotated, basic, basic)
	got := v.Cluster("member-1", echo)
	for _, secret := range []string{token, url.QueryEscape(token), rotated, basic, "query-secret-value", "hunter2hunter2", "basic-password-1"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q left in:\n%s", secret, got)
		}
	}
	if !strings.Contains(got, "list refused for token "+Placeholder) {
		t.Errorf("the message around the secrets is lost:\n%s", got)
	}

	// Another cluster: only what String removes by form.
	other := v.Cluster("member-2", "then "+rotated)
	if other != "then "+rotated {
		t.Errorf("member-2's text redacted of member-1's secrets: %q", other)
	}

	// Errors: redacted ones do not unwrap; clean ones are kept.
	sentinel := errors.New("clean")
	if err := v.ClusterErr("member-1", fmt.Errorf("wrapped: %w", sentinel)); !errors.Is(err, sentinel) {
		t.Errorf("a clean error lost its chain: %v", err)
	}
	err := v.ClusterErr("member-1", fmt.Errorf("echo %s: %w", token, sentinel))
	if errors.Is(err, sentinel) || strings.Contains(err.Error(), token) {
		t.Errorf("a redacted error unwraps to the original or keeps the token: %v", err)
	}
	if v.ClusterErr("member-1", nil) != nil {
		t.Error("nil error not kept nil")
	}

	// Forgotten: the values go.
	v.Forget("member-1")
	if got := v.Cluster("member-1", "then "+rotated); got != "then "+rotated {
		t.Errorf("forgotten secrets still redacted: %q", got)
	}
}

// Each cluster remembers its MaxRecent latest secrets: a token rotated out
// is still redacted for a while (requests sent with it still fail), the
// oldest is forgotten past the bound; values shorter than MinValue are not
// removed by value (they would cut words out of every message).
func TestValuesRememberTheRecentSecretsOnly(t *testing.T) {
	v := &Values{}
	for i := range MaxRecent + 2 {
		v.Remember("c", fmt.Sprintf("token-number-%02d", i))
	}
	got := v.Cluster("c", "token-number-00 token-number-01 token-number-02 token-number-09")
	if want := "token-number-00 token-number-01 " + Placeholder + " " + Placeholder; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	v.Remember("c", "short")
	if got := v.Cluster("c", "a short word"); got != "a short word" {
		t.Errorf("a value shorter than MinValue was removed: %q", got)
	}
}

// A token file's content is remembered when the config is.
func TestValuesRememberTheTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("file-token-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v := &Values{}
	v.RememberConfig("c", &rest.Config{BearerTokenFile: path})
	if got := v.Cluster("c", "refused file-token-value"); strings.Contains(got, "file-token-value") {
		t.Errorf("the token file's content not redacted: %q", got)
	}
}
