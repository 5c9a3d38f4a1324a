package daemon

import (
	"context"
	"testing"

	"github.com/dnsd/dnsd/pipeline"
)

type fakeSource struct {
	kind, endpoint, problem string
	synced                  bool
}

func (f *fakeSource) Lookup(context.Context, *pipeline.Question) pipeline.Result {
	return pipeline.Result{Status: pipeline.NotMine}
}
func (f *fakeSource) Kind() string                     { return f.kind }
func (f *fakeSource) TTL() uint32                      { return 5 }
func (f *fakeSource) Serial() uint32                   { return 1 }
func (f *fakeSource) Synced() bool                     { return f.synced }
func (f *fakeSource) WaitSynced(context.Context) error { return nil }
func (f *fakeSource) Endpoint() string                 { return f.endpoint }
func (f *fakeSource) Problem() string                  { return f.problem }

func TestReadiness(t *testing.T) {
	etcdDown := &fakeSource{kind: "etcd", endpoint: "http://127.0.0.1:2379", problem: "dial tcp 127.0.0.1:2379: connect: connection refused"}
	kubeNew := &fakeSource{kind: "kubernetes", endpoint: "https://10.0.0.1:6443"}
	kubeLost := &fakeSource{kind: "kubernetes", endpoint: "https://10.0.0.1:6443", problem: "401 Unauthorized", synced: true}
	fine := &fakeSource{kind: "etcd", endpoint: "http://10.0.0.2:2379", synced: true}
	for _, c := range []struct {
		name string
		srcs []pipeline.Source
		ok   bool
		why  string
	}{
		{"all synced", []pipeline.Source{fine}, true, ""},
		{"unsynced, each once", []pipeline.Source{etcdDown, kubeNew, etcdDown, fine}, false,
			"not synced yet:\netcd http://127.0.0.1:2379: dial tcp 127.0.0.1:2379: connect: connection refused\nkubernetes https://10.0.0.1:6443: connecting"},
		{"synced but unreachable", []pipeline.Source{fine, kubeLost}, true,
			"serving the last data, backend unreachable:\nkubernetes https://10.0.0.1:6443: 401 Unauthorized"},
	} {
		ok, why := readiness(c.srcs)
		if ok != c.ok || why != c.why {
			t.Errorf("%s: readiness = %v %q, want %v %q", c.name, ok, why, c.ok, c.why)
		}
	}
}
