// Package hosts is dnsd's hosts source (docs/sources/hosts.md): it serves
// A, AAAA and PTR records from /etc/hosts-format files and inline entries,
// and re-reads the files the moment they change.
//
// A Backend holds a set of files: it loads, indexes and watches them once
// and can be shared by any number of Sources (zones, reloads). A Source is
// one zone's view over a Backend plus its inline entries. The index holds
// every name of the files; it has no zone filter, because the pipeline only
// asks a source for names inside the source's zone.
//
// A reload gives way to the server when it runs on one processor (see
// package pacing): its read, parse and index build, and the count of names
// outside the zones that a build logs once per zone key. The start is never paced:
// nothing is served yet. A backend opened by a reload of the configuration
// loads paced (Options.Paced): the old configuration is serving meanwhile.
package hosts
