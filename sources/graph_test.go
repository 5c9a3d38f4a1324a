package sources

import (
	"os/exec"
	"strings"
	"testing"
)

// TestKindsImportNoLayerAbove: a kind's package sits below the server,
// the authority and the daemon; it imports none of them nor the process's metrics (a
// kind registers its own collectors through kind.Env).
func TestKindsImportNoLayerAbove(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	for _, k := range Kinds() {
		pkg := "github.com/dnsd/dnsd/sources/" + k.Name()
		out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for dep := range strings.Lines(string(out)) {
			switch strings.TrimSpace(dep) {
			case "github.com/dnsd/dnsd", "github.com/dnsd/dnsd/metrics", "github.com/dnsd/dnsd/server", "github.com/dnsd/dnsd/authority", "github.com/dnsd/dnsd/daemon":
				t.Errorf("%s imports %s", pkg, strings.TrimSpace(dep))
			}
		}
	}
}
