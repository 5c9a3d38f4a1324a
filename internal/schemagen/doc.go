// Command schemagen writes dnsd.schema.json from config.JSONSchema over
// the program's kind list, sources.ConfigKinds (run by go generate
// ./config). It lives above both packages so that config imports no
// kind.
package main
