// Package logtest holds a log destination for tests: the code under test
// writes to it from its own goroutines while the test reads it.
package logtest
