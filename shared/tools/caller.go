package tools

import "context"

type callerKey struct{}

// WithCaller returns ctx carrying userID as the user a tool runs for (the
// tool server takes it from the caller's verified identity).
func WithCaller(ctx context.Context, userID string) context.Context {
	return context.WithValue(ctx, callerKey{}, userID)
}

// Caller returns the user ctx's tool runs for, "" when anonymous.
func Caller(ctx context.Context) string {
	id, _ := ctx.Value(callerKey{}).(string)
	return id
}
