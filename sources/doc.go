// Package sources turns the sources of a validated config into pipeline
// sources through the source kinds (sources/<kind>, each implementing
// kind.Kind), and shares backends: sources whose backend settings are
// equal use one backend, across zones and across reloads. Kinds lists
// every kind dnsd has: the one place that names them.
package sources
