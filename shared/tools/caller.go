package tools

import "context"

// callerKey is the context key of the caller's identity.
type callerKey struct{}

// WithCaller returns a copy of ctx that says on whose behalf the tools run
// with it run: userID, an opaque, stable identifier of a user, or ""
// for an anonymous caller. Whoever sets it must have authenticated it (the
// tool server, from a verified identity): Registry.Run trusts it. The
// sandbox admits the isolated tools' runs per caller (see NewSandbox);
// all anonymous callers, such as MCP clients that present only the
// service key, share one allowance.
func WithCaller(ctx context.Context, userID string) context.Context {
	return context.WithValue(ctx, callerKey{}, userID)
}

// Caller returns the identity WithCaller put in ctx, or "" (anonymous)
// when there is none.
func Caller(ctx context.Context) string {
	id, _ := ctx.Value(callerKey{}).(string)
	return id
}
