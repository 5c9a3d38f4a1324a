// Package quote is how dnsd shows what a file holds in an error or a log
// line: at most Max bytes of it, and never the content of a file that
// holds a key, a password or a certificate.
package quote
