package e2e

// The release: scripts/release.sh run as a release manager would (for
// linux/amd64 only, to keep the suite fast), its .deb inspected with
// dpkg-deb and unpacked into a temporary root, its .rpm read with rpm, and
// a second run compared byte for byte.

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	dnsdconfig "github.com/dnsd/dnsd/config"
)

// needTool skips (or, in CI, fails) when a program the test runs is not
// installed; scripts/ci-deps.sh installs them.
func needTool(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed (scripts/ci-deps.sh installs it)", name)
			}
			t.Skipf("%s is not installed (scripts/ci-deps.sh installs it)", name)
		}
	}
}

func runOut(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// release runs scripts/release.sh for amd64 into a new directory and
// returns it with the SHA256SUMS lines.
func release(t *testing.T) (dir string, sums map[string]string) {
	t.Helper()
	dir = t.TempDir()
	runOut(t, ".", []string{"OUT=" + dir, "ARCHES=amd64", "VERSION=1.2.3~test", "GOFLAGS="}, "scripts/release.sh")
	data, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	sums = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		sums[name] = sum
	}
	runOut(t, dir, nil, "sha256sum", "--check", "--strict", "SHA256SUMS")
	return dir, sums
}

func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release (-short)")
	}
	needTool(t, "git", "dpkg-deb", "rpm", "groff", "systemd-analyze", "gzip", "sha256sum")
	dist, sums := release(t)

	// The version 1.2.3~test is the packages' (and dnsd version's); every
	// file name writes it 1.2.3-test ('~' is left out of file names).
	const (
		binName = "dnsd_1.2.3-test_linux_amd64"
		debName = "dnsd_1.2.3-test-1_amd64.deb"
		rpmName = "dnsd-1.2.3-test-1.x86_64.rpm"
	)
	var names []string
	for n := range sums {
		names = append(names, n)
		if strings.Contains(n, "~") || !strings.Contains(n, "1.2.3-test") {
			t.Errorf("release file %q: want the version as 1.2.3-test, as in every file name", n)
		}
	}
	slices.Sort(names)
	if want := slices.Sorted(slices.Values([]string{binName, debName, rpmName})); !slices.Equal(names, want) {
		t.Fatalf("release wrote %q, want %q", names, want)
	}

	t.Run("binary", func(t *testing.T) { checkStaticBinary(t, filepath.Join(dist, binName)) })
	t.Run("deb", func(t *testing.T) { checkDeb(t, filepath.Join(dist, debName)) })
	t.Run("rpm", func(t *testing.T) { checkRPM(t, filepath.Join(dist, rpmName)) })

	// The same commit again, in another directory: the same bytes.
	_, again := release(t)
	for name, sum := range sums {
		if again[name] != sum {
			t.Errorf("%s differs between two builds of the same commit (%s, then %s)", name, sum, again[name])
		}
	}
}

// checkStaticBinary: an ELF for amd64 without an interpreter or dynamic
// section (static), without symbols (stripped), stamped with the version.
func checkStaticBinary(t *testing.T, path string) {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		t.Errorf("machine %v, want x86-64", f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s has a %v program header: not static", path, p.Type)
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s has a symbol table: not stripped", path)
	}
	if bi, err := buildinfo.ReadFile(path); err != nil {
		t.Error(err)
	} else if tags := setting(bi, "-tags"); tags != releaseTags(t) {
		t.Errorf("%s built with tags %q, want %q (scripts/release-flags.sh)", path, tags, releaseTags(t))
	}
	out := runOut(t, ".", nil, path, "version")
	for _, want := range []string{"dnsd 1.2.3~test\n", "go1."} {
		if !strings.Contains(out, want) {
			t.Errorf("dnsd version printed %q, want %q in it", out, want)
		}
	}
	commit := strings.TrimSpace(runOut(t, ".", nil, "git", "rev-parse", "HEAD"))
	if !strings.Contains(out, "commit: "+commit) {
		t.Errorf("dnsd version printed %q, want commit %s", out, commit)
	}
	if !regexp.MustCompile(`date: +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`).MatchString(out) {
		t.Errorf("dnsd version printed %q, want the commit date", out)
	}
}

func checkDeb(t *testing.T, deb string) {
	info := runOut(t, ".", nil, "dpkg-deb", "--field", deb, "Package", "Version", "Architecture")
	for _, want := range []string{"Package: dnsd", "Version: 1.2.3~test-1", "Architecture: amd64"} {
		if !strings.Contains(info, want) {
			t.Errorf("control fields %q lack %q", info, want)
		}
	}
	// Contents and modes.
	listing := runOut(t, ".", nil, "dpkg-deb", "--contents", deb)
	wantFiles := map[string]string{ // path -> mode as tar lists it
		"./usr/bin/dnsd":                        "-rwxr-xr-x",
		"./etc/dnsd/":                           "drwxr-x---",
		"./etc/dnsd/dnsd.yaml":                  "-rw-r-----",
		"./usr/lib/systemd/system/dnsd.service": "-rw-r--r--",
		"./usr/lib/sysusers.d/dnsd.conf":        "-rw-r--r--",
		"./usr/lib/sysctl.d/60-dnsd.conf":       "-rw-r--r--",
		"./usr/share/man/man8/dnsd.8.gz":        "-rw-r--r--",
		"./usr/share/man/man5/dnsd.yaml.5.gz":   "-rw-r--r--",
		"./usr/share/doc/dnsd/copyright":        "-rw-r--r--",
		"./usr/share/dnsd/dnsd.schema.json":     "-rw-r--r--",
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(listing), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb --contents line %q", line)
		}
		path, mode := f[len(f)-1], f[0]
		seen[path] = true
		if want, ok := wantFiles[path]; ok && mode != want {
			t.Errorf("%s: mode %s, want %s", path, mode, want)
		}
		if f[1] != "root/root" {
			t.Errorf("%s: owner %s, want root/root", path, f[1])
		}
	}
	for path := range wantFiles {
		if !seen[path] {
			t.Errorf("the .deb lacks %s", path)
		}
	}

	// Control area: conffiles and maintainer scripts.
	control := filepath.Join(t.TempDir(), "DEBIAN")
	runOut(t, ".", nil, "dpkg-deb", "--control", deb, control)
	if got := readFile(t, filepath.Join(control, "conffiles")); strings.TrimSpace(got) != "/etc/dnsd/dnsd.yaml" {
		t.Errorf("conffiles = %q, want /etc/dnsd/dnsd.yaml", got)
	}
	checkMaintainerScripts(t, readFile(t, filepath.Join(control, "postinst")), readFile(t, filepath.Join(control, "prerm")))
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		runOut(t, ".", nil, "sh", "-n", filepath.Join(control, s))
	}

	// Unpacked into a root: the files land where the docs say and work.
	root := t.TempDir()
	runOut(t, ".", nil, "dpkg-deb", "--extract", deb, root)
	bin := filepath.Join(root, "usr/bin/dnsd")
	checkStaticBinary(t, bin)
	if out := runOut(t, ".", nil, bin, "check", "-config", filepath.Join(root, "etc/dnsd/dnsd.yaml")); !strings.Contains(out, ": ok") {
		t.Errorf("the packaged dnsd.yaml does not pass dnsd check: %s", out)
	}
	if got, want := readFile(t, filepath.Join(root, "usr/lib/systemd/system/dnsd.service")), readFile(t, "contrib/dnsd.service"); got != want {
		t.Error("the packaged unit is not contrib/dnsd.service")
	}
	if got, want := readFile(t, filepath.Join(root, "usr/lib/sysusers.d/dnsd.conf")), readFile(t, "contrib/dnsd.sysusers"); got != want {
		t.Error("the packaged sysusers.d entry is not contrib/dnsd.sysusers")
	}
	checkSysctl(t, readFile(t, filepath.Join(root, "usr/lib/sysctl.d/60-dnsd.conf")))
	t.Run("maintainer scripts", func(t *testing.T) { runMaintainerScripts(t, control, bin) })
	man := filepath.Join(root, "usr/share/man")
	checkManPage(t, filepath.Join(man, "man8/dnsd.8.gz"), "DNSD", "8", []string{"SIGNALS", "RELOAD"})
	checkManPage(t, filepath.Join(man, "man5/dnsd.yaml.5.gz"), "DNSD.YAML", "5", []string{"ZONES", "CONVENTIONS"})

	// The installed unit verifies as installed: its ExecStart binary and its
	// Documentation= man pages are the package's own.
	unitDir := t.TempDir()
	unit := strings.ReplaceAll(readFile(t, filepath.Join(root, "usr/lib/systemd/system/dnsd.service")), "/usr/bin/dnsd", bin)
	writeFile(t, filepath.Join(unitDir, "dnsd.service"), unit)
	cmd := exec.Command("systemd-analyze", "verify", filepath.Join(unitDir, "dnsd.service"))
	cmd.Env = append(os.Environ(), "MANPATH="+man, "SYSTEMD_LOG_LEVEL=notice")
	out, err := cmd.CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Errorf("systemd-analyze verify of the packaged unit (man pages from the package): %v\n%s", err, out)
	}
}

// checkSysctl: the packaged sysctl.d drop-in is contrib/dnsd.sysctl and
// raises net.core.rmem_max to the default limits.udp_rcvbuf, so that a
// fresh install gets the buffer it asks for without CAP_NET_ADMIN.
func checkSysctl(t *testing.T, text string) {
	t.Helper()
	if text != readFile(t, "contrib/dnsd.sysctl") {
		t.Error("the packaged /usr/lib/sysctl.d/60-dnsd.conf is not contrib/dnsd.sysctl")
	}
	want := fmt.Sprintf("net.core.rmem_max = %d", dnsdconfig.DefaultUDPRcvBuf)
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).MatchString(text) {
		t.Errorf("/usr/lib/sysctl.d/60-dnsd.conf lacks %q:\n%s", want, text)
	}
}

// checkMaintainerScripts: the user is created, and an upgrade runs dnsd
// check before it restarts, restarting only when the check passes.
func checkMaintainerScripts(t *testing.T, postinst, prerm string) {
	t.Helper()
	for _, want := range []string{"systemd-sysusers /usr/lib/sysusers.d/dnsd.conf", "useradd --system", "systemctl daemon-reload"} {
		if !strings.Contains(postinst, want) {
			t.Errorf("postinst lacks %q", want)
		}
	}
	check := strings.Index(postinst, "/usr/bin/dnsd check -config /etc/dnsd/dnsd.yaml")
	guard := strings.Index(postinst, "if $check; then")
	restart := strings.Index(postinst, "systemctl restart dnsd.service")
	if check < 0 || guard < check || restart < guard {
		t.Errorf("postinst must run dnsd check and restart only if it passes (check at %d, guard at %d, restart at %d)", check, guard, restart)
	}
	if !strings.Contains(prerm, "systemctl disable --now dnsd.service") {
		t.Error("prerm does not stop dnsd on removal")
	}
}

// checkManPage: gzip'd roff with the right title that groff formats
// without a warning, with the sections of a man page (NAME, SYNOPSIS,
// DESCRIPTION, FILES, SEE ALSO) and the ones given, each once.
func checkManPage(t *testing.T, path, title, section string, sections []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	roff, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !strings.Contains(string(roff), ".TH \""+title+"\" "+section+" ") {
		t.Errorf("%s: no .TH %s %s header", path, title, section)
	}
	for _, b := range roff {
		if b > 0x7e || b < 0x20 && b != '\n' {
			t.Errorf("%s: byte %#x: the page must be ASCII roff", path, b)
			break
		}
	}
	cmd := exec.Command("groff", "-t", "-man", "-Tutf8", "-P-cbou", "-ww")
	cmd.Stdin = strings.NewReader(string(roff))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("groff %s: %v\n%s", path, err, stderr.String())
	}
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		t.Errorf("groff %s: %s", path, sc.Text())
	}
	for _, s := range append([]string{"NAME", "SYNOPSIS", "DESCRIPTION", "FILES", "SEE ALSO"}, sections...) {
		if n := len(regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(s)+`$`).FindAllString(stdout.String(), -1)); n != 1 {
			t.Errorf("%s: %d %s sections in the formatted page, want 1", path, n, s)
		}
	}
}

// runMaintainerScripts runs the package's scripts as dpkg and rpm call
// them, with the system commands they use (systemctl, systemd-sysusers,
// runuser, chown, chmod, chgrp) replaced by stubs that record their arguments, and
// the paths they touch (/etc/dnsd, /run/systemd/system, /usr/bin/dnsd)
// moved into a scratch directory: nothing on this machine changes.
func runMaintainerScripts(t *testing.T, control, dnsd string) {
	dir := t.TempDir()
	stubs := filepath.Join(dir, "bin")
	etc := filepath.Join(dir, "etc/dnsd")
	for _, d := range []string{stubs, etc, filepath.Join(dir, "run/systemd/system")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	calls := filepath.Join(dir, "calls")
	stub := func(name, body string) {
		writeFile(t, filepath.Join(stubs, name), "#!/bin/sh\necho \""+name+" $*\" >>"+calls+"\n"+body+"\n")
		if err := os.Chmod(filepath.Join(stubs, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stub("systemctl", `[ "$1" = is-active ] && exit "${ACTIVE:-0}"; exit 0`)
	stub("systemd-sysusers", "exit 0")
	stub("chown", "exit 0")
	stub("chmod", "exit 0")
	stub("chgrp", "exit 0")
	stub("runuser", `shift 3; exec "$@"`) // runuser -u dnsd -- CMD...
	stub("systemd-sysctl", `exit "${SYSCTL_FAIL:-0}"`)
	rmem := filepath.Join(dir, "rmem_max")
	script := func(name string) string {
		text := strings.NewReplacer("/usr/bin/dnsd", dnsd, "/etc/dnsd", etc, "/run/systemd/system", filepath.Join(dir, "run/systemd/system"),
			"/usr/lib/systemd/systemd-sysctl", filepath.Join(stubs, "systemd-sysctl"), "/proc/sys/net/core/rmem_max", rmem).
			Replace(readFile(t, filepath.Join(control, name)))
		path := filepath.Join(dir, name)
		writeFile(t, path, text)
		return path
	}
	good := "zones:\n  example.internal:\n    - hosts: {entries: [\"10.0.0.1 a\"]}\n"
	bad := good + "bogus: 1\n"
	cases := []struct {
		name, script string
		args         []string
		config       string
		active       string // systemctl is-active exit status
		rmem         string // net.core.rmem_max; "": Debian's default
		sysctlFail   string // systemd-sysctl's exit status
		want, not    []string
		stderr       string
	}{
		{name: "deb install", script: "postinst", args: []string{"configure", ""}, config: good,
			want: []string{"systemd-sysusers /usr/lib/sysusers.d/dnsd.conf", "chown root:dnsd", "chmod 0750", "systemctl daemon-reload",
				"systemd-sysctl --prefix=net.core.rmem_max"},
			not: []string{"systemctl restart", "systemctl is-active"}},
		{name: "deb install, rmem_max larger already", script: "postinst", args: []string{"configure", ""}, config: good, rmem: "16777216",
			want: []string{"systemctl daemon-reload"}, not: []string{"systemd-sysctl"}},
		{name: "deb install, sysctl not writable", script: "postinst", args: []string{"configure", ""}, config: good, sysctlFail: "1",
			want: []string{"systemd-sysctl --prefix=net.core.rmem_max", "systemctl daemon-reload"}, stderr: "applies at the next boot"},
		{name: "deb upgrade, running, good config", script: "postinst", args: []string{"configure", "1.0.0-1"}, config: good,
			want: []string{"systemd-sysusers", "systemctl is-active --quiet dnsd.service", "runuser -u dnsd -- " + dnsd + " check", "systemctl restart dnsd.service"},
			not:  []string{"chown"}},
		{name: "deb upgrade, running, bad config", script: "postinst", args: []string{"configure", "1.0.0-1"}, config: bad,
			want: []string{"runuser -u dnsd -- " + dnsd + " check"}, not: []string{"systemctl restart"},
			stderr: "NOT restarting"},
		{name: "deb upgrade, stopped", script: "postinst", args: []string{"configure", "1.0.0-1"}, config: good, active: "3",
			want: []string{"systemctl is-active"}, not: []string{"runuser", "systemctl restart"}},
		{name: "rpm install", script: "postinst", args: []string{"1"}, config: good,
			want: []string{"chown root:dnsd"}, not: []string{"systemctl restart"}},
		{name: "rpm upgrade, bad config", script: "postinst", args: []string{"2"}, config: bad,
			want: []string{"chgrp dnsd " + etc}, // group root (as RPM leaves it): given back to dnsd
			not:  []string{"chown", "systemctl restart"}, stderr: "NOT restarting"},
		{name: "deb remove", script: "prerm", args: []string{"remove"}, want: []string{"systemctl disable --now dnsd.service"}},
		{name: "deb upgrade prerm", script: "prerm", args: []string{"upgrade", "1.2.3-1"}, not: []string{"systemctl"}},
		{name: "rpm erase", script: "prerm", args: []string{"0"}, want: []string{"systemctl disable --now dnsd.service"}},
		{name: "rpm upgrade preun", script: "prerm", args: []string{"1"}, not: []string{"systemctl"}},
		{name: "postrm", script: "postrm", args: []string{"remove"}, want: []string{"systemctl daemon-reload"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(calls)
			writeFile(t, filepath.Join(etc, "dnsd.yaml"), c.config)
			writeFile(t, rmem, cmp.Or(c.rmem, "212992")+"\n")
			cmd := exec.Command("sh", append([]string{script(c.script)}, c.args...)...)
			cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "ACTIVE="+c.active, "SYSCTL_FAIL="+c.sysctlFail)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s %q: %v\n%s", c.script, c.args, err, stderr.String())
			}
			got, _ := os.ReadFile(calls)
			for _, w := range c.want {
				if !strings.Contains(string(got), w) {
					t.Errorf("no %q among the commands run:\n%s", w, got)
				}
			}
			for _, n := range c.not {
				if strings.Contains(string(got), n) {
					t.Errorf("%q was run:\n%s", n, got)
				}
			}
			if !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), c.stderr)
			}
		})
	}
}

func checkRPM(t *testing.T, rpm string) {
	q := runOut(t, ".", nil, "rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE}", rpm)
	if q != "dnsd 1.2.3~test 1 x86_64 Apache-2.0" {
		t.Errorf("rpm header: %q", q)
	}
	runOut(t, ".", nil, "rpm", "--checksig", "--nosignature", rpm) // digests
	files := strings.Fields(runOut(t, ".", nil, "rpm", "-qpl", rpm))
	for _, want := range []string{"/usr/bin/dnsd", "/etc/dnsd/dnsd.yaml", "/usr/lib/systemd/system/dnsd.service",
		"/usr/lib/sysusers.d/dnsd.conf", "/usr/lib/sysctl.d/60-dnsd.conf", "/usr/share/man/man8/dnsd.8.gz", "/usr/share/man/man5/dnsd.yaml.5.gz"} {
		if !slices.Contains(files, want) {
			t.Errorf("the .rpm lacks %s (has %q)", want, files)
		}
	}
	// The drop-in's content, by its digest (SHA-256 in nfpm's packages).
	sum := sha256.Sum256([]byte(readFile(t, "contrib/dnsd.sysctl")))
	digests := runOut(t, ".", nil, "rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEDIGESTS}\n]", rpm)
	if !strings.Contains(digests, "/usr/lib/sysctl.d/60-dnsd.conf "+hex.EncodeToString(sum[:])+"\n") {
		t.Errorf("the .rpm's /usr/lib/sysctl.d/60-dnsd.conf is not contrib/dnsd.sysctl:\n%s", digests)
	}
	checkSysctl(t, readFile(t, "contrib/dnsd.sysctl"))
	if c := strings.TrimSpace(runOut(t, ".", nil, "rpm", "-qpc", rpm)); c != "/etc/dnsd/dnsd.yaml" {
		t.Errorf("rpm config files %q, want /etc/dnsd/dnsd.yaml", c)
	}
	// %config(noreplace): verify flags of the config file.
	if fl := runOut(t, ".", nil, "rpm", "-qp", "--qf", "[%{FILENAMES} %{FILEFLAGS:fflags}\n]", rpm); !strings.Contains(fl, "/etc/dnsd/dnsd.yaml cn") {
		t.Errorf("/etc/dnsd/dnsd.yaml is not %%config(noreplace):\n%s", fl)
	}
	scripts := runOut(t, ".", nil, "rpm", "-qp", "--scripts", rpm)
	checkMaintainerScripts(t, scripts, scripts)
	if !strings.Contains(scripts, "[0-9]*)") {
		t.Error("the rpm post-install script does not handle RPM's numeric argument")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// releaseTags are the build tags scripts/release-flags.sh gives releases.
func releaseTags(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("scripts/release-flags.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^release_tags=(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/release-flags.sh sets no release_tags")
	}
	return string(m[1])
}

// TestReleaseTags: with the release's build tags dnsd links neither gRPC's
// request tracing nor the template packages it brings (which keep every
// exported method in the binary); without them it does, so the check
// would see the tags stop working (a gRPC upgrade renaming its tag).
func TestReleaseTags(t *testing.T) {
	links := func(args ...string) map[string]bool {
		out, err := exec.Command("go", append(append([]string{"list"}, args...), "-deps", ".")...).Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		m := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			m[p] = true
		}
		return m
	}
	heavy := []string{"golang.org/x/net/trace", "html/template", "text/template"}
	plain, release := links(), links("-tags", releaseTags(t))
	for _, p := range heavy {
		if !plain[p] {
			t.Errorf("a build without the release tags no longer links %s: are the tags still needed?", p)
		}
		if release[p] {
			t.Errorf("a release build links %s", p)
		}
	}
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
