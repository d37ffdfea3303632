package attachment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// signatures are the leading bytes of the binary types: what a file of
// the type starts with (WebP: "RIFF", four bytes of length, "WEBP"; PDF:
// "%PDF-", which readers accept within the first 1024 bytes).
var signatures = map[string]struct {
	prefix []byte
	at     int // offset of prefix
	within int // prefix may start anywhere in the first within bytes (0: at at)
	name   string
}{
	"image/png":       {prefix: []byte("\x89PNG\r\n\x1a\n"), name: "a PNG image"},
	"image/jpeg":      {prefix: []byte("\xff\xd8\xff"), name: "a JPEG image"},
	"image/webp":      {prefix: []byte("WEBP"), at: 8, name: "a WebP image"},
	"application/pdf": {prefix: []byte("%PDF-"), within: 1024, name: "a PDF document"},
}

// Check reads r to its end and reports why its bytes are not a file of
// type contentType and size bytes, or "" when they are: exactly size
// bytes; binary types start with their signature (WebP also with
// "RIFF"); text types are UTF-8 without NUL bytes; JSON is one JSON value.
// It fails only when r fails.
func Check(contentType string, size int64, r io.Reader) (string, error) {
	c := &checker{contentType: contentType}
	if IsText(contentType) {
		c.text = true
	}
	var dec *json.Decoder
	var decoded chan string
	var pw *io.PipeWriter
	if contentType == "application/json" {
		var pr *io.PipeReader
		pr, pw = io.Pipe()
		dec = json.NewDecoder(pr)
		decoded = make(chan string, 1)
		go func() {
			reason := checkJSON(dec)
			// Drain the rest so the writer never blocks.
			_, _ = io.Copy(io.Discard, pr)
			decoded <- reason
		}()
	}
	buf := make([]byte, 64<<10)
	var readErr error
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.write(buf[:n])
			if pw != nil {
				_, _ = pw.Write(buf[:n])
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		if c.n > size {
			break // more than declared: no need to read on
		}
	}
	if pw != nil {
		pw.Close()
	}
	jsonReason := ""
	if decoded != nil {
		jsonReason = <-decoded
	}
	if readErr != nil {
		return "", readErr
	}
	switch {
	case c.n != size:
		if c.n > size {
			return fmt.Sprintf("the upload holds more than the declared %d bytes", size), nil
		}
		return fmt.Sprintf("the upload holds %d bytes, not the declared %d", c.n, size), nil
	case c.reason != "":
		return c.reason, nil
	}
	if sig, ok := signatures[contentType]; ok {
		if !c.hasSignature(sig.prefix, sig.at, sig.within) || contentType == "image/webp" && !bytes.HasPrefix(c.head, []byte("RIFF")) {
			return fmt.Sprintf("the file is not %s: it does not start with that format's signature", sig.name), nil
		}
	}
	if c.text && len(c.carry) > 0 {
		return "the file is not UTF-8 text: it ends inside a character", nil
	}
	return jsonReason, nil
}

// checker follows a stream of bytes.
type checker struct {
	contentType string
	text        bool
	n           int64
	head        []byte // the first headLen bytes
	carry       []byte
	reason      string
}

const headLen = 1024

func (c *checker) write(p []byte) {
	if len(c.head) < headLen {
		c.head = append(c.head, p[:min(len(p), headLen-len(c.head))]...)
	}
	c.n += int64(len(p))
	if !c.text || c.reason != "" {
		return
	}
	// UTF-8 across chunk boundaries: keep an incomplete last character for
	// the next chunk.
	chunk := p
	if len(c.carry) > 0 {
		chunk = append(append(make([]byte, 0, len(c.carry)+len(p)), c.carry...), p...)
	}
	end := len(chunk)
	for k := 1; k <= 3 && k <= len(chunk); k++ {
		if utf8.RuneStart(chunk[len(chunk)-k]) {
			if !utf8.FullRune(chunk[len(chunk)-k:]) {
				end = len(chunk) - k
			}
			break
		}
	}
	c.carry = append(c.carry[:0], chunk[end:]...)
	switch whole := chunk[:end]; {
	case !utf8.Valid(whole):
		c.reason = "the file is not UTF-8 text"
	case bytes.IndexByte(whole, 0) >= 0:
		c.reason = "the file is not text: it holds NUL bytes"
	}
}

func (c *checker) hasSignature(prefix []byte, at, within int) bool {
	if within > 0 {
		return bytes.Contains(c.head[:min(len(c.head), within)], prefix)
	}
	return len(c.head) >= at+len(prefix) && bytes.Equal(c.head[at:at+len(prefix)], prefix)
}

// checkJSON reads one JSON value from dec, token by token (nothing is
// kept), and reports why the stream is not exactly one JSON value.
func checkJSON(dec *json.Decoder) string {
	depth := 0
	for first := true; first || depth > 0; first = false {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "the file is not JSON: it holds no value, or ends inside one"
			}
			return "the file is not valid JSON: " + err.Error()
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "the file is not valid JSON: it holds data after its value"
	}
	return ""
}
