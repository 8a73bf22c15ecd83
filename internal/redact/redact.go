// Package redact keeps credentials out of error messages about kubeconfigs.
package redact

import "strings"

// Error removes from err's message every word that also appears in data and
// is long enough to be a secret: parsers quote the offending input, and a
// kubeconfig holds tokens and keys. An error that quotes nothing is returned
// as it is.
func Error(err error, data []byte) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	words := strings.FieldsFunc(msg, func(r rune) bool {
		return r == ' ' || r == '\n' || r == '\t' || r == '"' || r == '\'' || r == '`' || r == ',' || r == ':'
	})
	changed := false
	for _, w := range words {
		if len(w) >= 8 && strings.Contains(string(data), w) {
			msg = strings.ReplaceAll(msg, w, "[redacted]")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &redactedError{msg: msg}
}

// redactedError prints the redacted message. It deliberately does not unwrap
// to the original error, whose message may quote credentials.
type redactedError struct{ msg string }

func (e *redactedError) Error() string { return e.msg }
