// Command dnsd is a DNS server for VMs and bare metal that answers, per
// zone, from an ordered list of sources (kubernetes, etcd, hosts files,
// forward upstreams), configured by one dnsd.yaml file. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/daemon"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources"
)

// Set with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && (args[0] == "check" || args[0] == "version") {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("dnsd "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default ./dnsd.yaml, then /etc/dnsd/dnsd.yaml)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage:\n  dnsd [-config PATH]        run\n  dnsd check [-config PATH]  validate the config\n  dnsd version               print the version\n")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dnsd: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	switch cmd {
	case "version":
		fmt.Fprintf(stdout, "dnsd %s commit %s %s %s/%s\n", version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return 0
	case "check":
		return check(configPath(*path), stdout, stderr)
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, os.Interrupt)
	err := daemon.Run(context.Background(), daemon.Options{
		ConfigPath: configPath(*path), Version: version, Commit: buildCommit(), LogOutput: stderr,
	}, signals)
	if err != nil {
		if !errors.Is(err, daemon.ErrForcedExit) {
			fmt.Fprintln(stderr, err)
		}
		return 1
	}
	return 0
}

// check parses, validates and compiles the config without serving.
func check(path string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(path)
	if err == nil {
		reg := sources.NewRegistry(sources.Options{Logger: discardLogger(), DryRun: true})
		var set *sources.Set
		_, set, err = reg.Build(context.Background(), cfg, pipeline.Options{Logger: discardLogger()})
		set.Release()
		reg.Close()
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	return 0
}

// configPath applies the default search: ./dnsd.yaml, then
// /etc/dnsd/dnsd.yaml.
func configPath(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if _, err := os.Stat("dnsd.yaml"); err == nil {
		return "dnsd.yaml"
	}
	if _, err := os.Stat("/etc/dnsd/dnsd.yaml"); err == nil {
		return "/etc/dnsd/dnsd.yaml"
	}
	return "dnsd.yaml"
}

func buildCommit() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
