// Package mctest holds helpers shared by this repository's tests: a recorder of
// reconcile requests, polling assertions, and manager start-up.
package mctest
