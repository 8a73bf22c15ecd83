// Package redact keeps credentials out of everything the library prints: log
// lines, error strings, Events and metric labels. Every provider and helper
// passes what it prints about a cluster's connection through it.
//
// What it removes: the user-info (user and password) and the query string of
// every URL (servers, proxies, request URLs quoted by net/http), bearer and
// basic Authorization values, and, for errors about a kubeconfig, every word
// the error quotes from the kubeconfig itself (parsers quote the offending
// input, and a kubeconfig holds tokens, keys, and exec arguments and
// environment).
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Placeholder replaces what is removed.
const Placeholder = "[redacted]"

var (
	// urlPattern finds URLs in free text: a scheme, "://", and everything up
	// to a space or a quote.
	urlPattern = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>\x60]+`)
	// authPattern finds credentials after an HTTP authentication scheme.
	authPattern = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]+`)
)

// URL returns raw with its user-info and query string replaced. A string that
// does not parse as a URL is returned whole if it carries nothing that looks
// like a credential, and as Placeholder otherwise.
func URL(raw string) string {
	// Text redacted once is redacted again unchanged (an error is redacted
	// where it is made and again where it is shown): a placeholder left in
	// the user-info or query would not parse.
	u, err := url.Parse(strings.ReplaceAll(raw, Placeholder, placeholderInURL))
	if err != nil {
		if strings.ContainsAny(raw, "@?") {
			return Placeholder
		}
		return raw
	}
	changed := false
	if u.User != nil {
		u.User = url.User(Placeholder)
		changed = true
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery = Placeholder
		u.ForceQuery = false
		changed = true
	}
	if u.Fragment != "" {
		u.Fragment = ""
		u.RawFragment = ""
		changed = true
	}
	if !changed {
		return raw
	}
	// Keep the placeholder readable instead of percent-encoded.
	return strings.NewReplacer("%5Bredacted%5D", Placeholder, placeholderInURL, Placeholder).Replace(u.String())
}

// placeholderInURL stands for Placeholder while a URL is parsed.
const placeholderInURL = "mcr-redacted"

// String redacts every URL and Authorization value found in s.
func String(s string) string {
	if strings.Contains(s, "://") {
		s = urlPattern.ReplaceAllStringFunc(s, URL)
	}
	return authPattern.ReplaceAllString(s, "${1}${2}"+Placeholder)
}

// Err is Error without the kubeconfig: it redacts URLs and Authorization
// values. A nil error stays nil.
func Err(err error) error {
	return Error(err, nil)
}

// Error redacts err's message: URLs and Authorization values, and every word
// of the message that also appears in data (the kubeconfig the error is
// about) and is long enough to be a secret. An error with nothing to redact is
// returned as it is, so that errors.Is and errors.As still work on it;
// otherwise the result deliberately does not unwrap to the original error,
// whose message holds what was removed.
func Error(err error, data []byte) error {
	if err == nil {
		return nil
	}
	orig := err.Error()
	msg := String(orig)
	if len(data) > 0 {
		words := strings.FieldsFunc(msg, func(r rune) bool {
			return r == ' ' || r == '\n' || r == '\t' || r == '"' || r == '\'' || r == '`' || r == ',' || r == ':'
		})
		for _, w := range words {
			if len(w) >= 8 && w != Placeholder && strings.Contains(string(data), w) {
				msg = strings.ReplaceAll(msg, w, Placeholder)
			}
		}
	}
	if msg == orig {
		return err
	}
	return &redactedError{msg: msg}
}

// redactedError prints the redacted message.
type redactedError struct{ msg string }

func (e *redactedError) Error() string { return e.msg }
