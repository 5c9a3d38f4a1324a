package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/sources"
)

func main() {
	out := flag.String("o", "dnsd.schema.json", "output file")
	flag.Parse()
	data, err := config.JSONSchema(sources.ConfigKinds())
	if err == nil {
		err = os.WriteFile(*out, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}
