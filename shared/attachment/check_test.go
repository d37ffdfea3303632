package attachment_test

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/workflowchat/service/shared/attachment"
)

var (
	png  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	jpeg = []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")
	webp = []byte("RIFF\x24\x00\x00\x00WEBPVP8 ")
	pdf  = []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj")
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType string
		data              []byte
		size              int64 // -1: len(data)
		reason            string
	}{
		{"png", "image/png", png, -1, ""},
		{"jpeg", "image/jpeg", jpeg, -1, ""},
		{"webp", "image/webp", webp, -1, ""},
		{"pdf", "application/pdf", pdf, -1, ""},
		{"pdf after a preamble", "application/pdf", append([]byte("garbage\n"), pdf...), -1, ""},
		{"text", "text/plain", []byte("héllo wörld ✓ 𝄞"), -1, ""},
		{"markdown", "text/markdown", []byte("# Title\n\n- item"), -1, ""},
		{"csv", "text/csv", []byte("a,b\n1,2\n"), -1, ""},
		{"json object", "application/json", []byte(`{"a": [1, 2, {"b": null}], "c": "✓"}`), -1, ""},
		{"json scalar", "application/json", []byte(` 42 `), -1, ""},

		{"png declared, jpeg sent", "image/png", jpeg, -1, "not a PNG image"},
		{"jpeg declared, png sent", "image/jpeg", png, -1, "not a JPEG image"},
		{"webp without RIFF", "image/webp", append([]byte("RIFX"), webp[4:]...), -1, "not a WebP image"},
		{"webp declared, riff wave sent", "image/webp", []byte("RIFF\x24\x00\x00\x00WAVEfmt "), -1, "not a WebP image"},
		{"pdf declared, text sent", "application/pdf", []byte("hello, this is not a pdf"), -1, "not a PDF document"},
		{"short png", "image/png", png[:4], -1, "not a PNG image"},
		{"text with invalid utf-8", "text/plain", []byte("abc\xff\xfedef"), -1, "not UTF-8 text"},
		{"text cut inside a character", "text/plain", []byte("abc\xe2\x9c"), -1, "ends inside a character"},
		{"text with NUL", "text/csv", []byte("a,b\x00"), -1, "NUL bytes"},
		{"binary as text", "text/plain", png, -1, "not UTF-8 text"},
		{"json syntax error", "application/json", []byte(`{"a": }`), -1, "not valid JSON"},
		{"json cut short", "application/json", []byte(`{"a": [1, 2`), -1, "JSON"},
		{"json twice", "application/json", []byte(`{} {}`), -1, "data after its value"},
		{"json empty", "application/json", []byte(`   `), -1, "holds no value"},
		{"fewer bytes than declared", "image/png", png, int64(len(png)) + 1, "holds 16 bytes, not the declared 17"},
		{"more bytes than declared", "text/plain", []byte("abcdef"), 3, "more than the declared 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			size := tt.size
			if size < 0 {
				size = int64(len(tt.data))
			}
			// Whole, and one byte per read (characters and signatures
			// split across reads).
			for _, r := range []struct {
				name string
				rd   io.Reader
			}{{"whole", bytes.NewReader(tt.data)}, {"bytewise", iotest.OneByteReader(bytes.NewReader(tt.data))}} {
				reason, err := attachment.Check(tt.contentType, size, r.rd)
				if err != nil {
					t.Fatal(err)
				}
				if tt.reason == "" && reason != "" || tt.reason != "" && !strings.Contains(reason, tt.reason) {
					t.Errorf("%s: reason %q, want %q", r.name, reason, tt.reason)
				}
			}
		})
	}
}

func TestCheckLargeText(t *testing.T) {
	t.Parallel()
	// Multi-byte characters across every 64 KiB read.
	data := []byte(strings.Repeat("€", 100_000))
	if reason, err := attachment.Check("text/plain", int64(len(data)), bytes.NewReader(data)); err != nil || reason != "" {
		t.Fatalf("large text: %q %v", reason, err)
	}
	big := []byte(`[` + strings.Repeat(`{"k":"vé"},`, 200_000) + `1]`)
	if reason, err := attachment.Check("application/json", int64(len(big)), bytes.NewReader(big)); err != nil || reason != "" {
		t.Fatalf("large json: %q %v", reason, err)
	}
}

func TestCheckReportsReadErrors(t *testing.T) {
	t.Parallel()
	if _, err := attachment.Check("text/plain", 10, iotest.ErrReader(iotest.ErrTimeout)); err == nil {
		t.Fatal("a failing reader gave no error")
	}
}
