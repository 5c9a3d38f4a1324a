// Package pacingtest counts, for tests, the sleeps of work paced by package
// pacing, and checks them against what the work should have done.
package pacingtest
