package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/mcruntime/multicluster-runtime/pkg/clusters"
	mcfleet "github.com/mcruntime/multicluster-runtime/pkg/fleet"
)

// A token about to expire is reported once, through the report of the Set
// that gave it, naming the cluster and never the token; a new token resets
// the warning, an opaque one has none, and a removed member none either.
func TestMembersWarnOfATokenAboutToExpire(t *testing.T) {
	engine := mcfleet.New(mcfleet.Options{}) // not started: the warnings are the record's from publication on
	var m clusters.Members
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.Start(ctx, engine, logr.Discard())
	reports := make(chan error, 8)
	report := func(err error) { reports <- err }
	token := func(lifetime time.Duration, issued time.Time) string {
		return clusters.UnsignedJWT(fmt.Sprintf(`{"iat":%d,"exp":%d}`, issued.Unix(), issued.Add(lifetime).Unix()))
	}
	cfg := func(token string) *rest.Config {
		return &rest.Config{Host: "https://member.example:6443", BearerToken: token}
	}

	// Issued 58 minutes ago for an hour: past its warning already.
	late := token(time.Hour, time.Now().Add(-58*time.Minute))
	m.Set("member", "late", cfg(late), report)
	select {
	case err := <-reports:
		var expiring *clusters.ExpiringCredentialsError
		if !errors.As(err, &expiring) || expiring.Cluster != "member" {
			t.Fatalf("reported %v, want an ExpiringCredentialsError of member", err)
		}
		if strings.Contains(err.Error(), late) {
			t.Error("the warning holds the token")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a token two minutes from its expiry was not warned of")
	}
	// The source changes, the token does not: the warning given stands
	// (one made anew would be due at this Set, and report again).
	given, _ := clusters.ExpiryWarningOf(engine, "member")
	moved := cfg(late)
	moved.Host = "https://elsewhere.example:6443"
	m.Set("member", "late, elsewhere", moved, report)
	if at, ok := clusters.ExpiryWarningOf(engine, "member"); !ok || !at.Equal(given) {
		t.Errorf("the same token with another server is warned of at %v (%v), want the warning given (%v) kept", at, ok, given)
	}

	// A rotation: the new token's warning comes at 80 % of its hour.
	issued := time.Now()
	m.Set("member", "fresh", cfg(token(time.Hour, issued)), report)
	at, ok := clusters.ExpiryWarningOf(engine, "member")
	want := issued.Add(48 * time.Minute).Truncate(time.Second)
	if !ok || at.Sub(want).Abs() > time.Second {
		t.Errorf("the rotated token is warned of at %v (%v), want %v", at, ok, want)
	}
	select {
	case err := <-reports:
		t.Errorf("a fresh token was reported: %v", err)
	default:
	}

	m.Set("member", "opaque", cfg("opaque-token"), report)
	if _, ok := clusters.ExpiryWarningOf(engine, "member"); ok {
		t.Error("an opaque token has an expiry warning")
	}
	m.Set("member", "fresh", cfg(token(time.Hour, issued)), report)
	m.Remove("member")
	if _, ok := clusters.ExpiryWarningOf(engine, "member"); ok {
		t.Error("a removed member has an expiry warning")
	}
}
