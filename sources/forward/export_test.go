package forward

import "testing"

// Exported for the registry tests of package forward_test.

// TestUpstream is a real in-process upstream server (see upstreamServer).
type TestUpstream struct{ u *upstreamServer }

func StartTestUpstream(t *testing.T) TestUpstream { return TestUpstream{startUpstream(t)} }

func (t TestUpstream) Addr() string            { return t.u.Addr }
func (t TestUpstream) Count(name string) int64 { return t.u.count(name) }
func (t TestUpstream) SetSilent(silent bool)   { t.u.set(func(u *upstreamServer) { u.silent = silent }) }
func (t TestUpstream) SetTTL(ttl uint32)       { t.u.set(func(u *upstreamServer) { u.ttl = ttl }) }
