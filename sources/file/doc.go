// Package file is the file source kind: RFC 1035 master files ($ORIGIN,
// $TTL, $INCLUDE relative to the file) and inline records in zone-file
// syntax, watched and reloaded like hosts files, the last good zone kept
// when the file turns bad (docs/sources/file.md).
package file
