package main

import (
	"encoding/base64"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/dnsd/dnsd/internal/testpki"
)

// The checks of this file hold the reference docs to the tree: what they
// list is what there is.

// fuzzTarget is the declaration scripts/fuzz.sh looks for.
var fuzzTarget = regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)`)

// repoFiles walks the module's own directories (not .git, testdata or the
// modules of their own under hack/) and calls fn for every file.
func repoFiles(t *testing.T, fn func(path string)) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "hack", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		fn(path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFuzzingDocListsEveryTarget: docs/fuzzing.md has one row per fuzz
// target of the repository (package and name), and no row for a target
// that is gone.
func TestFuzzingDocListsEveryTarget(t *testing.T) {
	var have []string
	repoFiles(t, func(path string) {
		if !strings.HasSuffix(path, "_test.go") {
			return
		}
		for _, m := range fuzzTarget.FindAllStringSubmatch(readFile(t, path), -1) {
			have = append(have, filepath.ToSlash(filepath.Dir(path))+" "+m[1])
		}
	})
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `(Fuzz[A-Za-z0-9_]+)` \\|")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(readFile(t, "docs/fuzzing.md"), -1) {
		listed = append(listed, m[1]+" "+m[2])
	}
	slices.Sort(have)
	slices.Sort(listed)
	if len(have) == 0 {
		t.Fatal("no fuzz target found")
	}
	for _, h := range have {
		if !slices.Contains(listed, h) {
			t.Errorf("docs/fuzzing.md does not list fuzz target %s", h)
		}
	}
	for _, l := range listed {
		if !slices.Contains(have, l) {
			t.Errorf("docs/fuzzing.md lists %s, which is not a fuzz target", l)
		}
	}
}

// TestReadmeLayoutListsEveryPackage: README.md's layout table has a row
// for every directory holding a Go package (the top-level one as
// main.go).
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	readme := readFile(t, "README.md")
	seen := map[string]bool{}
	repoFiles(t, func(path string) {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if seen[dir] {
			return
		}
		seen[dir] = true
		want := "| `" + dir + "/` |"
		if dir == "." {
			want = "| `main.go` |"
		}
		if !strings.Contains(readme, want) {
			t.Errorf("README.md's layout table has no row %q", want)
		}
	})
	if len(seen) < 2 {
		t.Fatalf("found only %d packages", len(seen))
	}
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+\.md)#([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
)

// anchors are the fragment names GitHub gives a Markdown file's headings:
// lower case, punctuation dropped, spaces as hyphens, a repeated heading
// numbered.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		m := mdHeading.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if inCode || m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(m[1])) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		for i, base := 1, a; out[a]; i++ {
			a = base + "-" + strconv.Itoa(i)
		}
		out[a] = true
	}
	return out
}

// TestDocAnchors: every link from one Markdown file of the repository to
// a heading of another (`file.md#heading`) names a heading that exists.
func TestDocAnchors(t *testing.T) {
	cache := map[string]map[string]bool{}
	links := 0
	repoFiles(t, func(path string) {
		if !strings.HasSuffix(path, ".md") {
			return
		}
		for _, m := range mdLink.FindAllStringSubmatch(readFile(t, path), -1) {
			if strings.Contains(m[1], "://") {
				continue
			}
			target := filepath.Join(filepath.Dir(path), m[1])
			a, ok := cache[target]
			if !ok {
				b, err := os.ReadFile(target)
				if err != nil {
					t.Errorf("%s: link to %s: %v", path, m[1], err)
					continue
				}
				a = anchors(string(b))
				cache[target] = a
			}
			links++
			if !a[m[2]] {
				t.Errorf("%s: link to %s#%s: no such heading", path, m[1], m[2])
			}
		}
	})
	if links == 0 {
		t.Fatal("no link to a heading found")
	}
}

// fieldDefault is what a field comment says about the field's zero value.
var fieldDefault = regexp.MustCompile(`(?i)\b(default|zero|nil|none|empty|required|always|never|unless|false)\b|""|\b0\b`)

// TestExportedFieldsDocumentDefaults: every exported field of a struct in
// authority/, server/, pipeline/, daemon/, metrics/, internal/, config/
// and sources/ has a comment that says what its zero value does
// ("default 0: no limit", "nil: discard", "required").
func TestExportedFieldsDocumentDefaults(t *testing.T) {
	fset := token.NewFileSet()
	fields := 0
	for _, dir := range []string{"authority", "server", "pipeline", "daemon", "metrics", "internal", "config", "sources"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				st, ok := n.(*ast.StructType)
				if !ok {
					return true
				}
				for _, fl := range st.Fields.List {
					doc := fl.Doc.Text() + fl.Comment.Text()
					for _, name := range fl.Names {
						if !name.IsExported() {
							continue
						}
						fields++
						if !fieldDefault.MatchString(doc) {
							t.Errorf("%s: field %s: its comment does not say what its zero value does (%q)",
								fset.Position(name.Pos()), name.Name, strings.TrimSpace(doc))
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if fields < 50 {
		t.Fatalf("found only %d exported fields", fields)
	}
}

// TestReadmeLinksEveryDoc: the README's list of the operator's docs links
// every page under docs/ (a new source's page included).
func TestReadmeLinksEveryDoc(t *testing.T) {
	readme := readFile(t, "README.md")
	pages := 0
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		pages++
		if !strings.Contains(readme, "]("+filepath.ToSlash(path)+")") {
			t.Errorf("README.md does not link %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pages < 5 {
		t.Fatalf("found only %d pages under docs/", pages)
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

// yamlBlock matches a fenced YAML example of a Markdown page: its text.
var yamlBlock = regexp.MustCompile("(?ms)^```yaml\n(.*?)^```")

// missingFile matches dnsd check's error for a file a config names that
// does not exist: the key's path and the file as resolved.
var missingFile = regexp.MustCompile(`(?m)^[^:\n]+:\d+:\d+: (.+?): file (\S+): no such file or directory$`)

// TestDocExamplesCheck: every YAML example of docs/*.md and
// docs/sources/*.md that is a whole configuration (a top-level zones:
// key) passes dnsd check. Each is checked as /etc/dnsd/dnsd.yaml would
// be, in a scratch directory that stands for /etc/dnsd (and for $HOME):
// the files it names that do not exist are written there, with content
// of the kind the key holds (a hosts file, a zone file, a TSIG secret, a
// kubeconfig, a certificate and its key...), and the example is checked
// again, until only its own errors remain.
func TestDocExamplesCheck(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("docs/sources/*.md")
	if err != nil {
		t.Fatal(err)
	}
	ca, leaf := testpki.Server(t, "dnsd.example")
	fixture := func(key string) (string, bool) {
		switch key {
		case "files": // hosts files
			return "10.0.0.1 fixture\n", true
		case "path": // a zone file: names relative to the zone's origin
			return "@ 300 IN SOA ns hostmaster 1 3600 600 86400 300\n@ 300 IN NS ns\nns 300 IN A 10.0.0.1\n", true
		case "secret_file": // a TSIG key, base64
			return base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")) + "\n", true
		case "password_file":
			return "fixture\n", true
		case "ca", "tls_ca":
			return string(ca.CertPEM), true
		case "cert":
			return string(leaf.CertPEM), true
		case "key":
			return string(leaf.KeyPEM), true
		case "kubeconfig":
			return "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:6443\"}}]\n" +
				"users: [{name: u, user: {token: fixture}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n", true
		}
		return "", false
	}
	checked := 0
	for _, page := range append(pages, more...) {
		text := readFile(t, page)
		for _, m := range yamlBlock.FindAllStringSubmatchIndex(text, -1) {
			example := text[m[2]:m[3]]
			where := page + ":" + strconv.Itoa(strings.Count(text[:m[2]], "\n")+1)
			var top map[string]any
			if yaml.Unmarshal([]byte(example), &top) != nil {
				continue // a fragment, not a document
			}
			if _, whole := top["zones"]; !whole {
				continue
			}
			checked++
			dir := t.TempDir()
			t.Setenv("HOME", dir)
			cfg := filepath.Join(dir, "dnsd.yaml")
			writeTestFile(t, cfg, strings.ReplaceAll(example, "/etc/dnsd/", ""))
			for try := 0; ; try++ {
				var stdout, stderr strings.Builder
				if check(cfg, &stdout, &stderr) == 0 {
					break
				}
				missing := missingFile.FindAllStringSubmatch(stderr.String(), -1)
				if len(missing) == 0 || try == 5 {
					t.Errorf("%s: the example does not pass dnsd check:\n%s", where, strings.ReplaceAll(stderr.String(), dir+"/", ""))
					break
				}
				for _, f := range missing {
					keyPath, file := f[1], f[2]
					if !filepath.IsAbs(file) {
						file = filepath.Join(dir, file) // relative to dnsd.yaml's directory
					}
					key := keyPath[strings.LastIndex(keyPath, ".")+1:]
					if i := strings.IndexByte(key, '['); i >= 0 {
						key = key[:i]
					}
					content, ok := fixture(key)
					if !ok || !strings.HasPrefix(file, dir+"/") {
						t.Errorf("%s: %s names %s: no fixture for key %q outside /etc/dnsd", where, keyPath, file, key)
						continue
					}
					if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
						t.Fatal(err)
					}
					writeTestFile(t, file, content)
				}
				if t.Failed() {
					break
				}
			}
		}
	}
	if checked < 10 {
		t.Errorf("%d whole configurations among the docs' examples, want at least 10", checked)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// shBlock matches a fenced shell example of a Markdown page: its text.
var shBlock = regexp.MustCompile("(?ms)^```sh\n(.*?)^```")

// TestReadmeDemoLeavesTheCloneAlone: the README's demo (its "Run it"
// section) serves and edits a scratch copy of dnsd.yaml and its data:
// every file its commands write is in that copy, none is a file of the
// clone, and the copy passes dnsd check on its own.
func TestReadmeDemoLeavesTheCloneAlone(t *testing.T) {
	readme := readFile(t, "README.md")
	start := strings.Index(readme, "\n## Run it\n")
	if start < 0 {
		t.Fatal("README.md has no \"## Run it\" section")
	}
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var lines []string
	for _, m := range shBlock.FindAllStringSubmatch(section, -1) {
		for _, l := range strings.Split(m[1], "\n") {
			if i := strings.Index(l, " #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
	}
	// The copy: "cp -r FILES... DIR/", DIR the demo's scratch directory.
	var scratch, copyLine string
	for _, l := range lines {
		if f := strings.Fields(l); strings.Contains(l, "cp -r ") {
			copyLine, scratch = l, strings.TrimSuffix(f[len(f)-1], "/")
		}
	}
	if scratch == "" || !filepath.IsAbs(scratch) {
		t.Fatalf("the demo copies nothing into a scratch directory (want a line `cp -r dnsd.yaml testdata DIR/`):\n%s", strings.Join(lines, "\n"))
	}
	redirect := regexp.MustCompile(`>>?\s*(\S+)`)
	for _, l := range lines {
		for _, m := range redirect.FindAllStringSubmatch(l, -1) {
			if !strings.HasPrefix(m[1], scratch+"/") {
				t.Errorf("the demo writes %s, which is not in its scratch copy %s: %q", m[1], scratch, l)
			}
		}
		if strings.Contains(l, "go run .") && !strings.Contains(l, "-config "+scratch+"/dnsd.yaml") {
			t.Errorf("the demo runs dnsd on another config than its copy %s/dnsd.yaml: %q", scratch, l)
		}
	}
	// The copy, made where the test can: it is whole (nothing it names
	// is left behind in the clone).
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", strings.ReplaceAll(copyLine, scratch, dir))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", copyLine, err, out)
	}
	var stdout, stderr strings.Builder
	if check(filepath.Join(dir, "dnsd.yaml"), &stdout, &stderr) != 0 {
		t.Errorf("the demo's copy does not pass dnsd check:\n%s", stderr.String())
	}
}
