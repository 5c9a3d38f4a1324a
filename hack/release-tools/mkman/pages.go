package main

import (
	"fmt"
	"os"
	"path/filepath"
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
	pages := []*Page{
		{Name: "dnsd", Section: "8", Manual: "System Manager's Manual",
			Desc: "DNS server for VMs and bare metal, configured by one YAML file",
			Docs: []Doc{{Path: "README.md", Kind: Intro}, {Path: "docs/operations.md"}}},
		{Name: "dnsd.yaml", Section: "5", Manual: "File Formats Manual",
			Desc: "configuration file of dnsd(8)",
			Docs: yaml},
	}
	for _, p := range pages {
		p.Version, p.Date = version, date
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
