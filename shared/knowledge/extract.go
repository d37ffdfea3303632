package knowledge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

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
//
// Extract reads a PDF in this process; the service reads it with its
// Options.PDF (a PDFSandbox: a worker process).
func Extract(ctx context.Context, ct string, data []byte) (string, error) {
	return extract(ctx, inProcess{}, "", ct, data)
}

// extract is Extract reading a PDF of userID's with pdf. An error of pdf's
// that is a context's (the attempt ended) or an *errs.Error is returned as
// it is; any other is the file's, EXTRACT_FAILED.
func extract(ctx context.Context, pdf PDFExtractor, userID, ct string, data []byte) (string, error) {
	const op = "knowledge.Extract"
	switch t := baseType(ct); {
	case t == "application/pdf":
		text, err := pdf.PDFText(ctx, userID, data)
		var e *errs.Error
		switch {
		case err == nil:
			return text, nil
		case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
			return "", err
		case errors.As(err, &e):
			return "", err
		}
		return "", errs.E(op, errs.Invalid, CodeExtractFailed, err.Error())
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
