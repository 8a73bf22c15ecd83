package multiclusterruntime

// Every package of this module is generated from the exported API of
// github.com/mcruntime/multicluster-runtime: run `go generate ./...` here
// after that API changes (TestGeneratedFilesAreCurrent fails until then).

//go:generate go run ./internal/gencompat
