package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// secretKeys are the keys whose value names a file holding a key, a
// password or a certificate, wherever they are in dnsd.yaml.
var secretKeys = []string{"secret_file", "password_file", "key", "cert", "ca", "tls_ca", "kubeconfig"}

// noteSecretFiles records the files that the secretKeys of root name, so
// that a source reading a file can tell one of them (see SecretFile)
// before the keys' own blocks are parsed.
func (p *Parser) noteSecretFiles(root *yaml.Node) {
	if root == nil {
		return
	}
	if root.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(root.Content); i += 2 {
			k, v := root.Content[i], root.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Value != "" && slices.Contains(secretKeys, k.Value) {
				p.noteSecret(v.Value)
			}
		}
	}
	for _, c := range root.Content {
		p.noteSecretFiles(c)
	}
}

func (p *Parser) noteSecret(s string) {
	if s == "~" || strings.HasPrefix(s, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return
		}
		s = filepath.Join(home, s[1:])
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(p.dir, s)
	}
	if p.secrets == nil {
		p.secrets = make(map[string]bool)
	}
	p.secrets[filepath.Clean(s)] = true
	if real, err := filepath.EvalSymlinks(s); err == nil {
		p.secrets[real] = true
	}
}

// SecretFile reports whether path (absolute, or relative to the working
// directory) is, or is a link to, a file that dnsd.yaml names as a key,
// password, certificate or kubeconfig file: a source never quotes its
// content.
func (p *Parser) SecretFile(path string) bool {
	return secretIn(p.secrets, path)
}

// Secrets is a set of files that dnsd.yaml names as key, password,
// certificate or kubeconfig files (see Parser.SecretFiles).
type Secrets map[string]bool

// Has reports whether path is, or is a link to, one of s.
func (s Secrets) Has(path string) bool { return secretIn(s, path) }

// SecretFiles is the files SecretFile reports, for a source that reads
// files again after the parse (nil when dnsd.yaml names none).
func (p *Parser) SecretFiles() Secrets {
	if len(p.secrets) == 0 {
		return nil
	}
	return Secrets(p.secrets)
}

func secretIn(secrets map[string]bool, path string) bool {
	if len(secrets) == 0 {
		return false
	}
	if abs, err := filepath.Abs(path); err == nil && secrets[abs] {
		return true
	}
	real, err := filepath.EvalSymlinks(path)
	return err == nil && secrets[real]
}
