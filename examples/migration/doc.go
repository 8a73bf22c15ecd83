// Package migration holds the "after" side of every code change the book's
// migration page (docs/migration.md) asks of a controller written for the
// upstream multi-cluster design. It is compiled with the rest of the module,
// so that each snippet the page shows builds against this project's API;
// nothing here is meant to be imported.
//
// The "before" side is upstream's code, which does not compile against this
// module; the page shows it as text.
package migration
