// Package netfault puts faults between clients and an API server: a TCP
// proxy that cuts, black-holes or slows its connections (Proxy), and an HTTP
// proxy that breaks the lists and watches of a resource or silences every
// watch while answering everything else (APIProxy). internal/testbed's
// helpers and pkg/fleettest's Faults are built on them.
package netfault
