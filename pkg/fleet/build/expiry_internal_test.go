package build

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"
)

// jwt returns an unsigned JWT whose payload is claims (JSON).
func jwt(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + "." + enc([]byte("signature"))
}

func TestJWTTimesReadsExpAndIatOnly(t *testing.T) {
	exp, iat, ok := jwtTimes(jwt(`{"exp":1900000000,"iat":1899996400,"sub":"system:serviceaccount:a:b"}`))
	if !ok || exp.Unix() != 1900000000 || iat.Unix() != 1899996400 {
		t.Errorf("jwtTimes = %v, %v, %v; want exp 1900000000, iat 1899996400", exp.Unix(), iat.Unix(), ok)
	}
	// Padding some encoders leave in.
	padded := jwt(`{"exp":1900000000}`)
	padded = padded[:len(padded)-len(".c2lnbmF0dXJl")] + "==" + ".c2lnbmF0dXJl"
	if exp, iat, ok := jwtTimes(padded); !ok || exp.Unix() != 1900000000 || !iat.IsZero() {
		t.Errorf("a padded payload without iat: %v, %v, %v", exp.Unix(), iat, ok)
	}
	for name, token := range map[string]string{
		"an opaque token":      "abcdef0123456789",
		"two parts":            "a.b",
		"a payload not base64": "a.!!!.c",
		"a payload not JSON":   "a." + base64.RawURLEncoding.EncodeToString([]byte("exp")) + ".c",
		"no exp":               jwt(`{"iat":1899996400}`),
		"an exp not a number":  jwt(`{"exp":"soon"}`),
		"a negative exp":       jwt(`{"exp":-5}`),
		"an empty token":       "",
	} {
		if _, _, ok := jwtTimes(token); ok {
			t.Errorf("%s: read as a JWT with an exp", name)
		}
	}
}

func TestExpiryWarningComesAtTheShareOrTheLeadWhicheverIsFirst(t *testing.T) {
	seen := time.Unix(1_800_000_000, 0)
	token := func(iat, lifetime time.Duration) string {
		i, e := seen.Add(iat), seen.Add(iat+lifetime)
		return jwt(fmt.Sprintf(`{"iat":%d,"exp":%d}`, i.Unix(), e.Unix()))
	}
	for _, c := range []struct {
		name  string
		token string
		want  time.Duration // after seen
	}{
		// 80 % of an hour is 48 minutes: 12 minutes before exp.
		{"a ServiceAccount token of an hour", token(0, time.Hour), 48 * time.Minute},
		// 80 % of 15 minutes is 12: 3 minutes before exp.
		{"an EKS token of 15 minutes", token(0, 15*time.Minute), 12 * time.Minute},
		// 80 % of 5 minutes is 4, after exp-2m (3 minutes).
		{"a token of 5 minutes", token(0, 5*time.Minute), 3 * time.Minute},
		// Issued 50 minutes before it was seen: warned of at once.
		{"a token seen late", token(-50*time.Minute, time.Hour), 0},
		{"an expired token", token(-2*time.Hour, time.Hour), 0},
		// No iat: the lifetime counts from when it was seen.
		{"a token without iat", jwt(fmt.Sprintf(`{"exp":%d}`, seen.Add(time.Hour).Unix())), 48 * time.Minute},
	} {
		at, _, ok := ExpiryWarningAt(c.token, seen)
		if !ok {
			t.Errorf("%s: no warning", c.name)
			continue
		}
		if got := at.Sub(seen); got != c.want {
			t.Errorf("%s: warned of %s after it was seen, want %s", c.name, got, c.want)
		}
	}
	if _, _, ok := ExpiryWarningAt("opaque-token", seen); ok {
		t.Error("an opaque token: a warning, want none")
	}
}
