package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// manPages are the man pages and the docs each is made of, read from
// the repository at root. dnsd.yaml(5) takes every docs/sources/*.md
// page, in the order of their names, so a new kind's page reaches it
// without a change here.
func manPages(root, version, date string) ([]*Page, error) {
	sources, err := filepath.Glob(filepath.Join(root, "docs", "sources", "*.md"))
	if err != nil {
		return nil, err
	}
	if len(sources) == 0 {
		return nil, fmt.Errorf("no docs/sources/*.md under %s", root)
	}
	yaml := []Doc{{Path: "docs/configuration.md"}, {Path: "docs/views.md", Kind: Part}}
	for _, s := range sources { // Glob sorts by name
		rel, err := filepath.Rel(root, s)
		if err != nil {
			return nil, err
		}
		yaml = append(yaml, Doc{Path: filepath.ToSlash(rel), Kind: Part})
	}
	repo, err := repository(root)
	if err != nil {
		return nil, err
	}
	config := File{"/etc/dnsd/dnsd.yaml", "The configuration file; without `-config`, `./dnsd.yaml` is read instead when it exists."}
	schema := File{"/usr/share/dnsd/dnsd.schema.json", "The JSON Schema of the configuration file, for editors."}
	pages := []*Page{
		{Name: "dnsd", Section: "8", Manual: "System Manager's Manual",
			Desc: "DNS server for VMs and bare metal, configured by one YAML file",
			Synopsis: []string{
				`\fBdnsd\fR [\fB\-config\fR \fIPATH\fR]`,
				`\fBdnsd check\fR [\fB\-config\fR \fIPATH\fR]`,
				`\fBdnsd version\fR`,
				`\fBdnsd help\fR`,
			},
			Docs: []Doc{{Path: "README.md", Kind: Intro}, {Path: "docs/operations.md"}},
			Files: []File{config,
				{"/usr/lib/systemd/system/dnsd.service", "The systemd unit."},
				{"/usr/lib/sysusers.d/dnsd.conf", "The system user and group `dnsd`."},
				{"/usr/lib/sysctl.d/60-dnsd.conf", "Raises `net.core.rmem_max` to the UDP receive buffer dnsd asks for."},
				{"/var/lib/dnsd", "The default `state_dir`: the copies of secondary zones."},
				schema,
			},
			SeeAlso: []string{"dnsd.yaml(5)", "systemctl(1)", "journalctl(1)", "systemd.service(5)", "sysctl.d(5)", "sysusers.d(5)"}},
		{Name: "dnsd.yaml", Section: "5", Manual: "File Formats Manual",
			Desc: "configuration file of dnsd(8)",
			Synopsis: []string{
				`\fI/etc/dnsd/dnsd.yaml\fR`,
				`\fBdnsd check\fR [\fB\-config\fR \fIPATH\fR]`,
			},
			Docs:    yaml,
			Files:   []File{config, schema},
			SeeAlso: []string{"dnsd(8)", "hosts(5)", "resolv.conf(5)"}},
	}
	for _, p := range pages {
		p.Version, p.Date, p.Repository = version, date, repo
		for i, d := range p.Docs {
			text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(d.Path)))
			if err != nil {
				return nil, err
			}
			p.Docs[i].Text = string(text)
		}
	}
	return pages, nil
}

// repository is the web address of the repository at root, from its
// module path (github.com/owner/name: https://github.com/owner/name).
func repository(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if mod, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return "https://" + strings.Trim(strings.TrimSpace(mod), `"`), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod: no module line", root)
}

// installedFiles maps the repository files the packages install
// (contrib/packaging/nfpm.yaml's contents with a literal src) to their
// installed paths.
func installedFiles(root string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "contrib", "packaging", "nfpm.yaml"))
	if err != nil {
		return nil, err
	}
	var pkg struct {
		Contents []struct{ Src, Dst string }
	}
	if err := yaml.Unmarshal(b, &pkg); err != nil {
		return nil, fmt.Errorf("contrib/packaging/nfpm.yaml: %w", err)
	}
	out := map[string]string{}
	for _, c := range pkg.Contents {
		if c.Src != "" && !strings.Contains(c.Src, "$") {
			out[path.Clean(c.Src)] = c.Dst
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("contrib/packaging/nfpm.yaml installs no repository file")
	}
	return out, nil
}
