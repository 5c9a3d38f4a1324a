// Package turns is package pacing under its old name, for the few files
// that still import it: its names are aliases of pacing's. New code
// imports internal/pacing; the package goes once nothing imports it.
package turns
