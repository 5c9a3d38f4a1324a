package pipeline

import "context"

// A source that is about to wait on something outside the process (an
// upstream's answer, a query in flight it joins) says so first with
// Waiting(ctx). A server that answers a connection's queries one after
// another on one goroutine puts a hook in the context of those answers
// (WithWaitHook): at the call, the hook lets the connection's next queries
// go on elsewhere instead of waiting behind this one. Answers from memory
// never call it; a source that waits without calling it is still found
// out by the server, later.

type waitHookKey struct{}

// WithWaitHook returns ctx carrying hook, which Waiting calls.
func WithWaitHook(ctx context.Context, hook func()) context.Context {
	return context.WithValue(ctx, waitHookKey{}, hook)
}

// Waiting calls ctx's wait hook, if it has one: the caller is about to
// wait. It may be called more than once for one answer.
func Waiting(ctx context.Context) {
	if hook, ok := ctx.Value(waitHookKey{}).(func()); ok {
		hook()
	}
}
