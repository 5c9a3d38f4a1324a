package config_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestConfigImportsNoLayerAbove: config is the bottom of the package
// graph; of dnsd's own packages it imports only internal/ helpers (no
// kind, no pipeline), so the kinds can import it.
func TestConfigImportsNoLayerAbove(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/dnsd/dnsd/config").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for dep := range strings.Lines(string(out)) {
		dep = strings.TrimSpace(dep)
		rest, ours := strings.CutPrefix(dep, "github.com/dnsd/dnsd/")
		if ours && rest != "config" && !strings.HasPrefix(rest, "internal/") {
			t.Errorf("config imports %s, a package above it", dep)
		}
	}
}
