package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/rpm"
)

func main() {
	config := flag.String("config", "contrib/packaging/nfpm.yaml", "nfpm package description")
	format := flag.String("format", "", "deb or rpm")
	out := flag.String("out", "dist", "output directory")
	fileVersion := flag.String("fileversion", "", "the version as the file name writes it (default: the package's)")
	flag.Parse()
	path, err := build(*config, *format, *out, *fileVersion)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkpkg:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

func build(config, format, out, fileVersion string) (string, error) {
	if os.Getenv("SOURCE_DATE_EPOCH") == "" {
		return "", fmt.Errorf("SOURCE_DATE_EPOCH is not set: packages would not be reproducible")
	}
	// The packagers are named here, not looked up in nfpm's registry.
	var packager nfpm.Packager
	switch format {
	case "deb":
		packager = deb.Default
	case "rpm":
		packager = rpm.DefaultRPM
	default:
		return "", fmt.Errorf("-format %q: want deb or rpm", format)
	}
	cfg, err := nfpm.ParseFileWithEnvMapping(config, os.Getenv)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", config, err)
	}
	info, err := cfg.Get(format)
	if err != nil {
		return "", fmt.Errorf("%s for %s: %w", config, format, err)
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.Validate(info); err != nil {
		return "", fmt.Errorf("%s: %w", config, err)
	}
	// The file is named as the packager names it, with fileVersion for
	// the version: the package inside keeps info.Version.
	named := *info
	if fileVersion != "" {
		named.Version = fileVersion
	}
	target := filepath.Join(out, packager.ConventionalFileName(&named))
	tmp, err := os.CreateTemp(out, ".mkpkg-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := packager.Package(info, tmp); err != nil {
		tmp.Close()
		return "", fmt.Errorf("building the %s package: %w", format, err)
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return "", err
	}
	return target, nil
}
