package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/dnsd/dnsd/config"
	"github.com/dnsd/dnsd/daemon"
	"github.com/dnsd/dnsd/internal/gctune"
	"github.com/dnsd/dnsd/pipeline"
	"github.com/dnsd/dnsd/sources"
	"github.com/dnsd/dnsd/sources/dynamic"
	"github.com/dnsd/dnsd/sources/kind"
)

// Stamped by the release build (scripts/release.sh) with
// -ldflags "-X main.version=... -X main.commit=... -X main.date=...".
// Unstamped builds fall back to what the Go toolchain records
// (debug.ReadBuildInfo): the VCS revision and commit time.
var (
	version = "dev"
	commit  = ""
	date    = ""
)

const usage = `dnsd is a DNS server that answers, per zone, from an ordered list of sources
(kubernetes, etcd, hosts files, zone files, forward upstreams), configured by one YAML file.

usage:
  dnsd [-config PATH]          run the server
  dnsd check [-config PATH]    validate the config: parse, check the files it names, compile;
                               print errors as FILE:LINE:COL: message; exit 1 on error, 0 if valid
  dnsd version                 print the version, commit, build date and Go version
  dnsd help                    print this help

flags:
  -config PATH   the config file (default: ./dnsd.yaml, then /etc/dnsd/dnsd.yaml)
  -h, --help     print this help
  --version      same as dnsd version

signals: SIGHUP reloads the config; SIGTERM or SIGINT stops gracefully.
Documentation: man dnsd, man dnsd.yaml, or docs/ in the source repository.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command line. Exit codes: 0 success, 1 a failure
// (bad config, cannot serve), 2 a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		switch args[0] {
		case "check", "version", "help":
			cmd, args = args[0], args[1:]
		case "-version", "--version":
			cmd, args = "version", args[1:]
		default:
			if !strings.HasPrefix(args[0], "-") {
				fmt.Fprintf(stderr, "dnsd: unknown command %q\n\n%s", args[0], usage)
				return 2
			}
		}
	}
	if cmd == "help" {
		// "dnsd help check": the one usage text covers every command.
		if len(args) > 1 || len(args) == 1 && !slices.Contains([]string{"run", "check", "version", "help"}, args[0]) {
			fmt.Fprintf(stderr, "dnsd: no help for %q\n\n%s", strings.Join(args, " "), usage)
			return 2
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	flags := flag.NewFlagSet("dnsd "+cmd, flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {} // printed below, to stdout for -h and to stderr for mistakes
	var path *string
	if cmd != "version" {
		path = flags.String("config", "", "config file (default ./dnsd.yaml, then /etc/dnsd/dnsd.yaml)")
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "\n%s", usage)
		return 2
	}
	if cmd == "run" && flags.NArg() == 1 && flags.Arg(0) == "check" {
		// "dnsd -config PATH check": the flag before the command, as many
		// tools take it.
		cmd = "check"
	} else if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "dnsd: unexpected argument %q\n\n%s", flags.Arg(0), usage)
		return 2
	}
	if cmd == "version" {
		fmt.Fprint(stdout, versionText())
		return 0
	}
	cfgPath, err := configPath(*path)
	if err != nil {
		fmt.Fprintf(stderr, "dnsd: %v\n", err)
		return 1
	}
	if cmd == "check" {
		return check(cfgPath, stdout, stderr)
	}
	var (
		started func()
		bulk    kind.Bulk
	)
	if os.Getenv("GOGC") == "" {
		gc := gctune.Start()
		defer gc.Stop()
		started, bulk = gc.Synced, gc.Begin
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, os.Interrupt)
	// A log reader that goes away (a pipe to a logger that exited) must
	// not stop the server: writes to it fail instead of killing dnsd.
	signal.Ignore(syscall.SIGPIPE)
	err = daemon.Run(context.Background(), daemon.Options{
		ConfigPath: cfgPath, Version: version, Commit: buildCommit(), LogOutput: stderr, Started: started, Bulk: bulk,
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
	cfg, err := config.Load(path, sources.ConfigKinds())
	var (
		mu       sync.Mutex
		warnings []string
	)
	if err == nil {
		reg := sources.NewRegistry(sources.Options{Logger: discardLogger(), DryRun: true, Warnings: func(line string) {
			mu.Lock()
			warnings = append(warnings, line)
			mu.Unlock()
		}})
		var set *sources.Set
		_, set, err = reg.Build(context.Background(), cfg, pipeline.Options{Logger: discardLogger()})
		set.Release()
		reg.Close()
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// What the build warned of (sources that serve nothing, ...).
	for _, w := range warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", path, w)
	}
	// Stores of zone keys no longer listed: dnsd never deletes them.
	orphans, err := dynamic.Orphans(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "%s: warning: %v\n", path, err)
	}
	for _, o := range orphans {
		fmt.Fprintf(stderr, "%s: warning: dynamic store %s belongs to no zone key with a dynamic source; dnsd keeps it, delete it if its records are not wanted\n", path, o)
	}
	fmt.Fprintf(stdout, "%s: ok\n", path)
	return 0
}

// searchPaths are where dnsd looks for its config without -config, in
// order.
func searchPaths() []string { return []string{"dnsd.yaml", "/etc/dnsd/dnsd.yaml"} }

// configPath applies the default search: ./dnsd.yaml, then
// /etc/dnsd/dnsd.yaml. A path that exists but cannot be read is still
// chosen, so that the error names the real cause.
func configPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	var tried []string
	for _, p := range searchPaths() {
		if _, err := os.Stat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
		if !filepath.IsAbs(p) {
			wd, _ := os.Getwd()
			p = "./" + p + " (in " + wd + ")"
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("no config file found; tried %s (give one with -config PATH)", strings.Join(tried, " and "))
}

// buildCommit is the stamped commit, else the VCS revision the Go
// toolchain recorded, else "unknown".
func buildCommit() string {
	if commit != "" {
		return commit
	}
	if s := buildSetting("vcs.revision"); s != "" {
		if buildSetting("vcs.modified") == "true" {
			s += "-modified"
		}
		return s
	}
	return "unknown"
}

// buildDate is the stamped date, else the commit time the Go toolchain
// recorded, else "unknown".
func buildDate() string {
	if date != "" {
		return date
	}
	if s := buildSetting("vcs.time"); s != "" {
		return s
	}
	return "unknown"
}

func buildSetting(key string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return setting(bi, key)
	}
	return ""
}

// setting is bi's build setting key ("" when it has none).
func setting(bi *debug.BuildInfo, key string) string {
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// versionText is what dnsd version prints.
func versionText() string {
	return fmt.Sprintf("dnsd %s\n  commit: %s\n  date:   %s\n  go:     %s %s/%s\n",
		version, buildCommit(), buildDate(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
