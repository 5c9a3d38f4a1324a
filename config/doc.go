// Package config reads and validates dnsd.yaml into typed,
// defaulted values. Every problem is reported with FILE:LINE:COL; parsing
// never touches the network.
package config
