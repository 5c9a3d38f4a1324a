package quote

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// Max is the most of a file's content an error or a log line shows.
const Max = 80

// Ellipsis marks content cut at Max bytes.
const Ellipsis = "…"

// Excerpt is b when it has at most Max bytes, else its first Max bytes
// (cut before a UTF-8 character that would not fit) and Ellipsis. For a
// log attribute, which the handler quotes itself.
func Excerpt(b []byte) string {
	if len(b) <= Max {
		return string(b)
	}
	return string(b[:cut(b)]) + Ellipsis
}

// String is Excerpt of a string.
func String(s string) string {
	if len(s) <= Max {
		return s
	}
	return s[:cut([]byte(s[:min(len(s), Max+utf8.UTFMax)]))] + Ellipsis
}

// Q is b quoted (strconv.Quote, as %q) for a message: at most Max bytes
// of it, followed by Ellipsis when it was cut.
func Q(b []byte) string {
	if len(b) <= Max {
		return strconv.Quote(string(b))
	}
	return strconv.Quote(string(b[:cut(b)])) + Ellipsis
}

// QS is Q of a string.
func QS(s string) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	return Q([]byte(s[:min(len(s), Max+utf8.UTFMax)]))
}

// cut is where b (longer than Max) is cut: Max, or before the UTF-8
// character that Max would split (Max for bytes that are not UTF-8).
func cut(b []byte) int {
	for i := Max; i > Max-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return Max
}

// Secret reports whether data looks like the content of a key, password
// or certificate file: a line of it is one (see SecretLine).
func Secret(data []byte) bool {
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if SecretLine(line) {
			return true
		}
	}
	return false
}

// SecretLine reports whether line is one that only a key, password or
// certificate file holds: a PEM boundary ("-----BEGIN ..."), a BIND key
// statement (`key "name" {`) or secret (`secret "..."`), a DNSSEC private
// key file's "Private-key-format:", a kubeconfig's inline client key.
func SecretLine(line []byte) bool {
	line = bytes.TrimLeft(line, " \t")
	switch {
	case bytes.HasPrefix(line, []byte("-----BEGIN")),
		bytes.HasPrefix(line, []byte("Private-key-format:")),
		bytes.HasPrefix(line, []byte("client-key-data:")):
		return true
	case bytes.HasPrefix(line, []byte("secret")):
		rest := bytes.TrimLeft(line[len("secret"):], " \t")
		return len(rest) < len(line)-len("secret") && len(rest) > 0 && rest[0] == '"'
	case bytes.HasPrefix(line, []byte("key")):
		rest := bytes.TrimLeft(line[len("key"):], " \t")
		if len(rest) == len(line)-len("key") || len(rest) == 0 {
			return false
		}
		// The key's name (perhaps quoted), then "{".
		i := bytes.IndexAny(rest, " \t{")
		if i <= 0 {
			return false
		}
		rest = bytes.TrimLeft(rest[i:], " \t")
		return len(rest) > 0 && rest[0] == '{'
	}
	return false
}
