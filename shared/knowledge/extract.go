package knowledge

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"

	"github.com/workflowchat/service/shared/errs"
)

// CodeExtractFailed is the code of a document whose text could not be
// extracted; its message says why.
const CodeExtractFailed = "EXTRACT_FAILED"

// MaxTextBytes bounds the text extracted from one document.
const MaxTextBytes = 32 << 20

// Indexable reports whether documents of content type ct can be indexed:
// text, Markdown, CSV, JSON and PDF.
func Indexable(ct string) bool {
	ct = baseType(ct)
	return strings.HasPrefix(ct, "text/") || ct == "application/json" || ct == "application/pdf"
}

func baseType(ct string) string {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(ct))
}

// Extract returns the text of a document of content type ct: the bytes
// themselves for text-like types (invalid UTF-8 replaced), the text of
// each page for a PDF. Offsets of chunks are byte offsets into this text.
// Invalid EXTRACT_FAILED when the file is not what its type says (a zip
// named .pdf), is damaged, or holds no text (a scanned PDF: images
// only); Invalid UNSUPPORTED_MEDIA_TYPE for other types.
func Extract(ctx context.Context, ct string, data []byte) (string, error) {
	const op = "knowledge.Extract"
	switch t := baseType(ct); {
	case t == "application/pdf":
		text, err := pdfText(ctx, data)
		if err != nil {
			return "", errs.E(op, errs.Invalid, CodeExtractFailed, err.Error())
		}
		return text, nil
	case strings.HasPrefix(t, "text/") || t == "application/json":
		if len(data) > MaxTextBytes {
			return "", errs.E(op, errs.Invalid, CodeExtractFailed, fmt.Sprintf("the text is %d bytes, more than the %d indexed", len(data), MaxTextBytes))
		}
		s := string(data)
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		if strings.TrimSpace(s) == "" {
			return "", errs.E(op, errs.Invalid, CodeExtractFailed, "the document holds no text")
		}
		return s, nil
	default:
		return "", errs.E(op, errs.Invalid, CodeUnsupportedDocument, fmt.Sprintf("documents of type %s cannot be indexed: text, Markdown, CSV, JSON and PDF can", ct))
	}
}

// pdfText reads the text of each page of a PDF, failing with a message
// for its user. The parser panics on some malformed files: a panic is a
// damaged file.
func pdfText(ctx context.Context, data []byte) (text string, err error) {
	if !bytes.HasPrefix(bytes.TrimLeft(data[:min(len(data), 1024)], "\x00\t\n\r "), []byte("%PDF-")) {
		what := "it does not start with %PDF-"
		if bytes.HasPrefix(data, []byte("PK\x03\x04")) {
			what = "it is a zip archive"
		}
		return "", fmt.Errorf("the file is not a PDF: %s", what)
	}
	defer func() {
		if p := recover(); p != nil {
			text, err = "", fmt.Errorf("the PDF is damaged and cannot be read")
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", fmt.Errorf("the PDF cannot be read: %v", err)
	}
	var b strings.Builder
	fonts := map[string]*pdf.Font{}
	n := r.NumPage()
	for i := 1; i <= n; i++ {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("reading the PDF took too long")
		}
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		for _, name := range p.Fonts() {
			if _, ok := fonts[name]; !ok {
				f := p.Font(name)
				fonts[name] = &f
			}
		}
		s, err := p.GetPlainText(fonts)
		if err != nil {
			return "", fmt.Errorf("page %d of the PDF cannot be read: %v", i, err)
		}
		if b.Len()+len(s) > MaxTextBytes {
			return "", fmt.Errorf("the PDF holds more than %d bytes of text", MaxTextBytes)
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(strings.TrimLeft(s, "\n"))
	}
	out := strings.ToValidUTF8(b.String(), "\uFFFD")
	if strings.TrimSpace(out) == "" {
		return "", fmt.Errorf("the PDF holds no text (%d pages of images only, as a scan gives): text recognition (OCR) is not supported", n)
	}
	return out, nil
}
