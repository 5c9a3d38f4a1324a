// Command mkman turns the project's Markdown docs into its man pages, so
// the man pages are generated from docs/ at release time and never kept
// as a second copy of the text.
//
//	mkman -root . -out DIR -version 1.2.3
//
// writes DIR/dnsd.8 (README.md's introduction and docs/operations.md) and
// DIR/dnsd.yaml.5 (docs/configuration.md, then docs/views.md and every
// docs/sources/*.md page, in the order of their names, each a section).
// Each page has a SYNOPSIS, then the docs (the text before their first
// heading its one DESCRIPTION), then FILES and SEE ALSO. Links between
// docs become references to the section and page that hold the text, and
// links to other files the files' paths; SEE ALSO lists those the
// packages do not install (contrib/packaging/nfpm.yaml says which they
// do) with the repository's address (from go.mod). It handles the
// Markdown the docs use: headings, paragraphs, bullet and numbered lists,
// fenced code blocks, tables (as tbl(1) tables), inline code, bold,
// italics and links. The output is ASCII roff for man(7); the date comes
// from SOURCE_DATE_EPOCH so a release is reproducible.
package main
