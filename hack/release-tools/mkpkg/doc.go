// Command mkpkg builds one .deb or .rpm with nfpm (as a library) from the
// package description contrib/packaging/nfpm.yaml, whose ${VARS} come from
// the environment (scripts/release.sh sets them).
//
//	SOURCE_DATE_EPOCH=... mkpkg -config contrib/packaging/nfpm.yaml -format deb -out dist/
//
// It prints the path of the package it wrote, named as the packager names
// packages, with the version written as -fileversion says when it is
// given (scripts/release.sh gives the version with '-' for '~'). File times in the package
// are SOURCE_DATE_EPOCH (required), so the same inputs give the same bytes.
package main
