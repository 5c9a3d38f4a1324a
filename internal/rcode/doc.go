// Package rcode names DNS response codes for metric labels, for the
// metrics package and the sources that count their upstreams' answers.
package rcode
