// Package movetest proves the compatibility module's purpose: a program on
// this library's import path and a provider module written against
// upstream's, built together with one replace line, engage the provider's
// clusters on real API servers.
package movetest
