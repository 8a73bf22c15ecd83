// Package nop provides a Provider that never has clusters: a placeholder for
// strictly single-cluster setups that reuse multi-cluster code.
package nop
