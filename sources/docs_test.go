package sources

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dnsd/dnsd/config"
)

// TestEveryKindDocumented: a kind is its package, its line in Kinds and
// its page docs/sources/<name>.md. Every kind of the list has that page,
// which names each of its settings' keys (`key` or in an example, key:)
// and those of the top-level block it owns, and dnsd.schema.json
// describes it.
func TestEveryKindDocumented(t *testing.T) {
	data, err := config.JSONSchema(ConfigKinds())
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]json.RawMessage
		Defs       map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	for _, k := range Kinds() {
		name := k.Name()
		page := filepath.Join("..", "docs", "sources", name+".md")
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Errorf("kind %s has no page: %v", name, err)
			continue
		}
		if schema.Defs[name] == nil {
			t.Errorf("kind %s is not in the schema's $defs", name)
		}
		keys := k.Settings().Keys()
		if o, ok := k.(config.BlockOwner); ok {
			key, s := o.Block()
			if schema.Properties[key] == nil {
				t.Errorf("kind %s: its block %s is not in the schema", name, key)
			}
			keys = append(keys, key)
			keys = append(keys, s.Keys()...)
		}
		for _, key := range keys {
			if !strings.Contains(string(doc), "`"+key+"`") && !strings.Contains(string(doc), key+": ") {
				t.Errorf("%s does not name the key %s", page, key)
			}
		}
	}
}
