// Package fsutil reads the files dnsd is pointed at (dnsd.yaml, hosts
// files, keys, CA bundles) without ever blocking on something that is not
// a regular file: a FIFO, a device or a directory where a file should be
// is an error, found before any read.
package fsutil
