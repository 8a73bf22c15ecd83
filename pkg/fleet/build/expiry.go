package build

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mcruntime/multicluster-runtime/pkg/multicluster"
)

// A bearer token that is a JWT says when it expires. A source that is
// rotated (a kubeconfig Secret rewritten every quarter of an hour, say) gives
// a new token before then, and the cluster rotates into it in place; a
// source whose rotation stopped (a broken CronJob, a revoked
// credential-issuer) lets the token run out, and the cluster goes dark with
// a 401 from every request. Members warns before: once per token, when 80 %
// of its lifetime has passed or 2 minutes before it expires, whichever comes
// first, through the report of the Set that gave it (an Event on the source
// object, through the inventory kit) and a log line.

// Thresholds of the expiry warning.
const (
	// ExpiryWarningShare of a token's lifetime (from its iat to its exp)
	// after which its expiry is warned of.
	ExpiryWarningShare = 0.8
	// ExpiryWarningLead: the warning comes at least this long before exp.
	ExpiryWarningLead = 2 * time.Minute
)

// ExpiringCredentialsError is reported (see Members.Set) when a cluster's
// bearer token is about to expire and its source has not given another. It
// names the cluster, never the token.
type ExpiringCredentialsError struct {
	Cluster multicluster.ClusterName
	// Expires is the token's exp.
	Expires time.Time
}

func (e *ExpiringCredentialsError) Error() string {
	return fmt.Sprintf("cluster %q: its bearer token expires at %s and its source has not given another; rotate the credentials in the source",
		e.Cluster, e.Expires.UTC().Format(time.RFC3339))
}

// jwtTimes reads the exp and iat claims of token if it is a JWT, without
// verifying it: only the time to warn at is read from it. ok is false for a
// token that is not a JWT or has no exp.
func jwtTimes(token string) (exp, iat time.Time, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) > 64<<10 {
		return time.Time{}, time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, time.Time{}, false
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
		Iat *json.Number `json:"iat"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == nil {
		return time.Time{}, time.Time{}, false
	}
	seconds := func(n *json.Number) (time.Time, bool) {
		f, err := n.Float64()
		if err != nil || f <= 0 || f > 1<<40 {
			return time.Time{}, false
		}
		return time.Unix(int64(f), 0), true
	}
	if exp, ok = seconds(claims.Exp); !ok {
		return time.Time{}, time.Time{}, false
	}
	if claims.Iat != nil {
		iat, _ = seconds(claims.Iat)
	}
	return exp, iat, true
}

// ExpiryWarningAt returns when to warn of the expiry of token, first seen
// at seen: when ExpiryWarningShare of its lifetime has passed (from its iat,
// or from seen without one) or ExpiryWarningLead before its exp, whichever
// comes first, and never before seen. ok is false for a token that is not a
// JWT with an exp.
func ExpiryWarningAt(token string, seen time.Time) (at, exp time.Time, ok bool) {
	exp, iat, ok := jwtTimes(token)
	if !ok {
		return time.Time{}, time.Time{}, false
	}
	if iat.IsZero() || iat.After(seen) {
		iat = seen
	}
	at = exp.Add(-ExpiryWarningLead)
	if share := iat.Add(time.Duration(float64(exp.Sub(iat)) * ExpiryWarningShare)); share.Before(at) {
		at = share
	}
	if at.Before(seen) {
		at = seen
	}
	return at, exp, true
}
