// Package turnstest counts, for tests, the sleeps of work paced by package
// turns, and checks them against what the work should have done.
package turnstest
