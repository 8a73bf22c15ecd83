package redact

import (
	"fmt"
	"unicode/utf8"
)

// Bounds of what the library prints from a source object (a Secret, a
// Cluster, a ClusterProfile, a kubeconfig file): its fields are written by
// whoever may write the object, and one annotation alone may hold 256 KB.
const (
	// MaxValue bounds one value quoted from a source object.
	MaxValue = 64
	// MaxMessage bounds a message about a source object: an Event's note (the
	// API server refuses an events.k8s.io/v1 Event whose note is longer than
	// 1 KB, and records none) and the error of a log line.
	MaxMessage = 1000
)

// Value returns s cut to MaxValue bytes, saying how much was cut, for a
// value of a source object that a message quotes.
func Value(s string) string { return bound(s, MaxValue) }

// Message returns s cut to MaxMessage bytes, saying how much was cut.
func Message(s string) string { return bound(s, MaxMessage) }

// Bounded returns err with its message cut to MaxMessage bytes; an error
// within the bound is returned as it is. The bounded error unwraps to err.
func Bounded(err error) error {
	if err == nil || len(err.Error()) <= MaxMessage {
		return err
	}
	return &boundedError{msg: Message(err.Error()), err: err}
}

type boundedError struct {
	msg string
	err error
}

func (e *boundedError) Error() string { return e.msg }
func (e *boundedError) Unwrap() error { return e.err }

// bound cuts s to at most n bytes, at the start of a character, and says how
// many bytes it cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes more)", s[:cut], len(s)-cut)
}
