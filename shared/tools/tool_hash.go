package tools

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"time"
)

func hashTool() *Tool {
	return &Tool{
		ID:       "hash",
		Name:     "Hash text",
		Category: CategoryUtil,
		Description: "Computes a cryptographic digest of a text (its UTF-8 bytes) and returns it as lowercase hex. " +
			"Use it to fingerprint content, build cache keys, or compare texts without storing them. " +
			"Fields: text (the text to hash), algorithm (sha256, sha1 or md5; sha256 unless a legacy system needs another). " +
			`Example: {"text": "hello", "algorithm": "sha256"} returns {"digest": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}.`,
		InputSchema: []byte(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The text to hash; its UTF-8 bytes are digested.", "examples": ["hello"]},
    "algorithm": {"type": "string", "enum": ["sha256", "sha1", "md5"], "default": "sha256",
      "description": "Digest algorithm. sha256 is the safe choice; sha1 and md5 are for compatibility with older systems only."}
  },
  "required": ["text", "algorithm"],
  "additionalProperties": false
}`),
		OutputSchema: []byte(`{
  "type": "object",
  "properties": {
    "digest": {"type": "string", "pattern": "^[0-9a-f]+$", "description": "The digest as lowercase hexadecimal (64 characters for sha256, 40 for sha1, 32 for md5)."}
  },
  "required": ["digest"],
  "additionalProperties": false
}`),
		Annotations: computeOnly(),
		Timeout:     5 * time.Second,
		Run:         runHash,
	}
}

// runHash digests input "text" with input "algorithm". It fails with
// INVALID_PARAMS for an unsupported algorithm.
func runHash(_ context.Context, in map[string]any) (map[string]any, error) {
	text, err := stringArg(in, "text", true, "")
	if err != nil {
		return nil, err
	}
	alg, err := stringArg(in, "algorithm", false, "sha256")
	if err != nil {
		return nil, err
	}
	var h hash.Hash
	switch alg {
	case "sha256":
		h = sha256.New()
	case "sha1":
		h = sha1.New()
	case "md5":
		h = md5.New()
	default:
		return nil, invalidField("algorithm", "unsupported algorithm %q: use sha256, sha1 or md5", alg)
	}
	h.Write([]byte(text))
	return map[string]any{"digest": hex.EncodeToString(h.Sum(nil))}, nil
}
