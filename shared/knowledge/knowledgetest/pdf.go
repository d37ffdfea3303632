// Package knowledgetest makes the files the knowledge tests index: PDFs
// with text (one line per entry, in Helvetica) and PDFs of images only,
// the kind a scanner produces.
package knowledgetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
)

// TextPDF returns a PDF whose pages hold pages[i]'s lines, one text
// object per line.
func TextPDF(pages [][]string) []byte {
	var objs []string
	// 1 catalog, 2 pages, 3 font, then per page: page, content.
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	objs = append(objs,
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
	for i, lines := range pages {
		var c strings.Builder
		for j, l := range lines {
			fmt.Fprintf(&c, "BT /F1 11 Tf 72 %d Td (%s) Tj ET\n", 760-14*j, escape(l))
		}
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>", 5+2*i),
			stream("", []byte(c.String())))
	}
	return assemble(objs)
}

// ImagePDF returns a PDF of about size bytes whose pages each hold one
// uncompressed image of noise and no text.
func ImagePDF(size int) []byte {
	const side = 1024 // 1024x1024 gray: 1 MiB a page
	n := max(1, size/(side*side))
	rng := rand.New(rand.NewPCG(1, 2))
	img := make([]byte, side*side)
	for i := range img {
		img[i] = byte(rng.Uint32())
	}
	kids := make([]string, n)
	for i := range kids {
		kids[i] = fmt.Sprintf("%d 0 R", 3+3*i)
	}
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), n),
	}
	for i := 0; i < n; i++ {
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /Im0 %d 0 R >> >> /Contents %d 0 R >>", 5+3*i, 4+3*i),
			stream("", []byte("q 612 0 0 792 0 0 cm /Im0 Do Q\n")),
			stream(fmt.Sprintf("/Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray /BitsPerComponent 8 ", side, side), img))
	}
	return assemble(objs)
}

func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(s)
}

func stream(dict string, data []byte) string {
	return fmt.Sprintf("<< %s/Length %d >>\nstream\n%s\nendstream", dict, len(data), data)
}

// assemble numbers objs from 1 and writes them with their xref table.
func assemble(objs []string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}
