// Package single provides a Provider of exactly one pre-built cluster under a
// fixed name, engaged when the manager starts.
package single
