package toolclient

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/errs"
)

// Tool values passed by reference (InlineBytes, MaxValueBytes): the
// client and the tool server name, bound and read them alike.

// NewValueKey returns a fresh blob key under blob.PrefixCalls for a tool
// input or result passed by reference.
func NewValueKey() string { return blob.PrefixCalls + uuid.NewString() + ".json" }

// CheckValueSize fails with TooLarge TOOL_VALUE_TOO_LARGE when a tool
// value (what names it: "the tool input", "the tool's output") is n bytes
// of JSON, more than MaxValueBytes.
func CheckValueSize(op, what string, n int) error {
	if n > MaxValueBytes {
		return errs.E(op, errs.TooLarge, CodeValueTooLarge, fmt.Sprintf("%s is %d bytes of JSON, more than %d", what, n, MaxValueBytes))
	}
	return nil
}

// ReadValue returns the JSON of the tool value passed by reference at
// key: NotFound when it is missing, TooLarge TOOL_VALUE_TOO_LARGE past
// MaxValueBytes, and the blob store's errors.
func ReadValue(ctx context.Context, s blob.Backend, op, key string) ([]byte, error) {
	b, info, err := blob.ReadAll(ctx, s, key, MaxValueBytes)
	if errs.Is(err, errs.TooLarge) {
		return nil, errs.E(op, errs.TooLarge, CodeValueTooLarge,
			fmt.Sprintf("the tool value at %s is %d bytes of JSON, more than %d", key, info.Size, MaxValueBytes)).WithCause(err)
	}
	return b, errs.Wrap(op, err)
}
