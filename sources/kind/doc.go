// Package kind is the contract between the source registry and the source
// kinds: what a kind implements (Kind, and the optional interfaces of this package)
// and what the registry lends it while it builds a source (Env). A kind is
// one package under sources/ that owns its config block, backend, source,
// metrics and dry run; the registry knows it only through this interface
// and the explicit list of kinds the program passes to it.
package kind
