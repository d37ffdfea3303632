package knowledge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ledongthuc/pdf"
)

// Bounds of the text extraction of one PDF. The parser underneath walks
// what the file says without limits of its own (a page tree listing
// itself, a /Parent chain that loops, a page count of 9e18, one small
// compressed stream named thousands of times in a page's /Contents): each
// is checked here before the parser is given the structure, so that a
// file's time and memory are bounded by these figures, not by what it
// claims.
const (
	// MaxPDFPages is the most pages indexed: a PDF whose page tree holds,
	// or whose /Count claims, more fails.
	MaxPDFPages = 10000
	// MaxPDFTreeDepth is the deepest page tree read; a deeper one (or one
	// that loops, which is endlessly deep) fails. The /Parent chain of
	// every page must end within it too.
	MaxPDFTreeDepth = 64
	// MaxPDFPageStreams is the most entries of one page's /Contents.
	MaxPDFPageStreams = 1000
	// MaxPDFPageContent is the most decompressed content bytes of one
	// page, a stream named twice counting twice.
	MaxPDFPageContent = 16 << 20
	// MaxPDFContent is the most decompressed content bytes of a document.
	MaxPDFContent = 128 << 20
	// MaxPDFTime bounds the extraction of one PDF's text.
	MaxPDFTime = 2 * time.Minute

	// maxPDFTreeNodes bounds the nodes of a page tree visited.
	maxPDFTreeNodes = 2 * MaxPDFPages
	// A font's /ToUnicode map: at most this many decompressed bytes and
	// entries, each string of it at most maxPDFMapString bytes, so that
	// one character code cannot become megabytes of text.
	maxPDFFontMap        = 1 << 20
	maxPDFFontMapEntries = 1 << 16
	maxPDFMapString      = 256
	// pdfTextChunk is the most bytes of a shown string decoded at once,
	// the deadline checked between pieces.
	pdfTextChunk = 4096
)

// pdfError is a failure of a PDF with a message for its user. It is raised
// as a panic from inside the parser's callbacks, and returned as is.
type pdfError string

func (e pdfError) Error() string { return string(e) }

func pdfFail(format string, args ...any) {
	panic(pdfError(fmt.Sprintf(format, args...)))
}

var errPDFDamaged = errors.New("the PDF is damaged and cannot be read")

// pdfText reads the text of each page of a PDF, failing with a message
// for its user. The parser panics on malformed files: a panic is a
// damaged file, never the parser's own words.
func pdfText(ctx context.Context, data []byte) (text string, err error) {
	if !bytes.HasPrefix(bytes.TrimLeft(data[:min(len(data), 1024)], "\x00\t\n\r "), []byte("%PDF-")) {
		what := "it does not start with %PDF-"
		if bytes.HasPrefix(data, []byte("PK\x03\x04")) {
			what = "it is a zip archive"
		}
		return "", fmt.Errorf("the file is not a PDF: %s", what)
	}
	ctx, cancel := context.WithTimeout(ctx, MaxPDFTime)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(pdfError); ok {
				text, err = "", e
				return
			}
			text, err = "", errPDFDamaged
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		if strings.Contains(err.Error(), "password") || strings.Contains(err.Error(), "encrypt") {
			return "", errors.New("the PDF is encrypted and cannot be read")
		}
		return "", errPDFDamaged
	}
	x := &pdfExtractor{ctx: ctx, fonts: map[string]*pdf.Font{}}
	pages := x.pages(r.Trailer().Key("Root").Key("Pages"))
	for i, p := range pages {
		x.check()
		x.page(i+1, p)
	}
	out := strings.ToValidUTF8(x.text.String(), "\uFFFD")
	if strings.TrimSpace(out) == "" {
		return "", fmt.Errorf("the PDF holds no text (%d pages of images only, as a scan gives): text recognition (OCR) is not supported", len(pages))
	}
	return out, nil
}

type pdfExtractor struct {
	ctx     context.Context
	fonts   map[string]*pdf.Font
	text    strings.Builder
	content int64 // decompressed content bytes so far
}

// check fails when the deadline has passed.
func (x *pdfExtractor) check() {
	if x.ctx.Err() != nil {
		pdfFail("reading the PDF took too long")
	}
}

// pages returns the pages of the tree at root, in order, walking it
// itself, bounded in depth, nodes and pages.
func (x *pdfExtractor) pages(root pdf.Value) []pdf.Value {
	if root.Key("Type").Name() != "Pages" {
		pdfFail("the PDF is damaged: it has no page tree")
	}
	if c := root.Key("Count").Int64(); c > MaxPDFPages {
		pdfFail("the PDF says it has %d pages, more than the %d indexed", c, MaxPDFPages)
	}
	var pages []pdf.Value
	nodes := 0
	var walk func(v pdf.Value, depth int)
	walk = func(v pdf.Value, depth int) {
		if depth > MaxPDFTreeDepth {
			pdfFail("the PDF's page tree loops or is nested more than %d deep", MaxPDFTreeDepth)
		}
		kids := v.Key("Kids")
		for i := range kids.Len() {
			if nodes++; nodes > maxPDFTreeNodes {
				pdfFail("the PDF's page tree has more than %d nodes", maxPDFTreeNodes)
			}
			if nodes%256 == 0 {
				x.check()
			}
			kid := kids.Index(i)
			switch kid.Key("Type").Name() {
			case "Pages":
				walk(kid, depth+1)
			case "Page":
				if len(pages) == MaxPDFPages {
					pdfFail("the PDF has more than %d pages", MaxPDFPages)
				}
				pages = append(pages, kid)
			}
		}
	}
	walk(root, 1)
	return pages
}

// page appends the text of page n, p.
func (x *pdfExtractor) page(n int, p pdf.Value) {
	// The parser finds resources by following /Parent: that chain must end.
	depth := 0
	for v := p; !v.IsNull(); v = v.Key("Parent") {
		if depth++; depth > MaxPDFTreeDepth+1 {
			pdfFail("the PDF's page tree loops (page %d's /Parent chain does not end)", n)
		}
	}
	contents := p.Key("Contents")
	var streams []pdf.Value
	switch contents.Kind() {
	case pdf.Null:
		return
	case pdf.Stream:
		streams = []pdf.Value{contents}
	case pdf.Array:
		if contents.Len() > MaxPDFPageStreams {
			pdfFail("page %d of the PDF has %d content streams, more than the %d read", n, contents.Len(), MaxPDFPageStreams)
		}
		for i := range contents.Len() {
			s := contents.Index(i)
			if s.Kind() != pdf.Stream {
				pdfFail("page %d of the PDF is damaged", n)
			}
			streams = append(streams, s)
		}
	default:
		pdfFail("page %d of the PDF is damaged", n)
	}
	var pageBytes int64
	for _, s := range streams {
		pageLeft, docLeft := MaxPDFPageContent-pageBytes, MaxPDFContent-x.content-pageBytes
		m := x.measure(s, min(pageLeft, docLeft))
		switch {
		case m >= 0:
			pageBytes += m
		case pageLeft <= docLeft:
			pdfFail("page %d of the PDF holds more than %d bytes of content, the most read of a page", n, MaxPDFPageContent)
		default:
			pdfFail("the PDF holds more than %d bytes of content, the most read of a document", MaxPDFContent)
		}
	}
	x.content += pageBytes

	fontDict := pdf.Page{V: p}.Resources().Key("Font")
	for _, name := range fontDict.Keys() {
		if _, ok := x.fonts[name]; !ok {
			f := &pdf.Font{V: fontDict.Key(name)}
			x.checkFont(n, f.V)
			x.fonts[name] = f
		}
	}
	x.interpret(n, contents)
}

// measure returns the decompressed size of stream s, or -1 when it is more
// than limit bytes.
func (x *pdfExtractor) measure(s pdf.Value, limit int64) int64 {
	rc := s.Reader()
	defer rc.Close()
	buf := make([]byte, 32<<10)
	var n int64
	for {
		x.check()
		k, err := rc.Read(buf)
		if n += int64(k); n > limit {
			return -1
		}
		if err == io.EOF {
			return n
		}
		if err != nil {
			panic(errPDFDamaged)
		}
	}
}

// checkFont fails when the /ToUnicode map of font f is over its bounds,
// before the parser reads it whole into memory and decodes with it.
func (x *pdfExtractor) checkFont(n int, f pdf.Value) {
	tu := f.Key("ToUnicode")
	if tu.Kind() != pdf.Stream {
		return
	}
	if f.Kind() != pdf.Dict {
		return
	}
	bad := func() { pdfFail("a font of page %d of the PDF has a character map over its bounds", n) }
	if x.measure(tu, maxPDFFontMap) < 0 {
		bad()
	}
	entries := int64(0)
	count := int64(-1)
	str := func(v pdf.Value) {
		if v.Kind() == pdf.String && len(v.RawString()) > maxPDFMapString {
			bad()
		}
	}
	// The same stack handling as the parser's own reading of the map, so
	// that the values checked are the ones it keeps.
	pdf.Interpret(tu, func(stk *pdf.Stack, op string) {
		switch op {
		case "findresource":
			stk.Pop()
			stk.Pop()
			stk.Push(f) // any dictionary
		case "begincmap":
			stk.Push(f)
		case "endcmap":
			stk.Pop()
		case "begincodespacerange", "beginbfchar", "beginbfrange":
			count = stk.Pop().Int64()
			if count < 0 || entries+count > maxPDFFontMapEntries {
				bad()
			}
			entries += count
		case "endcodespacerange", "endbfchar", "endbfrange":
			per := int64(2)
			if op == "endbfrange" {
				per = 3
			}
			for range max(count, 0) * per {
				v := stk.Pop()
				str(v)
				if v.Kind() == pdf.Array {
					if v.Len() > maxPDFMapString {
						bad()
					}
					for i := range v.Len() {
						str(v.Index(i))
					}
				}
			}
			count = -1
		case "defineresource":
			stk.Pop()
			v := stk.Pop()
			stk.Pop()
			stk.Push(v)
		}
	})
}

// interpret appends the text shown by the content streams of page n,
// bounded by MaxTextBytes, checking the deadline as it goes.
func (x *pdfExtractor) interpret(n int, contents pdf.Value) {
	var page strings.Builder
	add := func(s string) {
		if x.text.Len()+page.Len()+len(s) > MaxTextBytes {
			pdfFail("the PDF holds more than %d bytes of text", MaxTextBytes)
		}
		page.WriteString(s)
	}
	var enc pdf.TextEncoding = nopEncoding{}
	show := func(raw string) {
		for len(raw) > 0 {
			x.check()
			k := min(len(raw), pdfTextChunk)
			add(enc.Decode(raw[:k]))
			raw = raw[k:]
		}
	}
	ops := 0
	pdf.Interpret(contents, func(stk *pdf.Stack, op string) {
		if ops++; ops%1024 == 0 {
			x.check()
		}
		args := make([]pdf.Value, stk.Len())
		for i := len(args) - 1; i >= 0; i-- {
			args[i] = stk.Pop()
		}
		switch op {
		case "BT":
			add("\n")
		case "T*":
			show("\n")
		case "Tf":
			enc = nopEncoding{}
			if len(args) == 2 {
				if f, ok := x.fonts[args[0].Name()]; ok {
					enc = f.Encoder()
				}
			}
		case "Tj", "'", "\"":
			if len(args) > 0 && args[len(args)-1].Kind() == pdf.String {
				show(args[len(args)-1].RawString())
			}
		case "TJ":
			if len(args) == 1 {
				for i := range args[0].Len() {
					if v := args[0].Index(i); v.Kind() == pdf.String {
						show(v.RawString())
					}
				}
			}
		}
	})
	s := strings.TrimLeft(page.String(), "\n")
	if x.text.Len() > 0 && !strings.HasSuffix(x.text.String(), "\n") {
		if x.text.Len()+1+len(s) > MaxTextBytes {
			pdfFail("the PDF holds more than %d bytes of text", MaxTextBytes)
		}
		x.text.WriteByte('\n')
	}
	x.text.WriteString(s)
}

// nopEncoding shows the bytes of a string as they are, as the parser does
// without a font.
type nopEncoding struct{}

func (nopEncoding) Decode(raw string) string { return raw }
