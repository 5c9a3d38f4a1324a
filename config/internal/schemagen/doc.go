// Command schemagen writes dnsd.schema.json from config.JSONSchema
// (run by go generate ./config).
package main
