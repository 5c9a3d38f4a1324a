// Command mkman turns the project's Markdown docs into a man page, so the
// man pages are generated from docs/ at release time and never kept as a
// second copy of the text.
//
//	mkman -name dnsd -section 8 -desc "DNS server ..." -version 1.2.3 \
//	    README.md:intro docs/operations.md > dnsd.8
//
// Each input is a Markdown file (its H1 title dropped); FILE:intro takes
// only the text before the file's first "## " heading. It handles the
// Markdown the docs use: headings, paragraphs, bullet and numbered lists,
// fenced code blocks, tables (as tbl(1) tables), inline code, bold,
// italics and links. The output is ASCII roff for man(7); the date comes
// from SOURCE_DATE_EPOCH so a release is reproducible.
package main
