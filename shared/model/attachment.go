package model

import (
	"fmt"
	"strings"
)

// Attachment is a file attached to a user message (Message.Attachments):
// a text document the model reads as context, an image it looks at, or a
// PDF document it reads, when it takes images or documents (Input); a
// model that does not gets a note naming the file instead.
type Attachment struct {
	Name        string
	ContentType string
	// Size is the file's size in bytes (Text may hold less: see Cut).
	Size int64
	// Text is a text-like file's content (KindText), cut to a bound by
	// the caller.
	Text string
	// Cut reports that Text holds only the start of the file.
	Cut bool
	// Data is the bytes of an image or a PDF (KindImage, KindDocument).
	Data []byte
}

// The kinds of attachment.
const (
	KindText     = "text"
	KindImage    = "image"
	KindDocument = "document"
)

// Kind returns a's kind from its content type: images (image/*),
// documents (application/pdf), text for the rest (text/*, JSON).
func (a Attachment) Kind() string {
	switch {
	case strings.HasPrefix(a.ContentType, "image/"):
		return KindImage
	case a.ContentType == "application/pdf":
		return KindDocument
	}
	return KindText
}

// Input is what a model takes besides text.
type Input struct {
	// Images: PNG, JPEG and WebP images.
	Images bool
	// Documents: PDF documents.
	Documents bool
}

// Takes reports whether a model taking in receives a itself: text always,
// images and documents when in says so.
func (in Input) Takes(a Attachment) bool {
	switch a.Kind() {
	case KindImage:
		return in.Images
	case KindDocument:
		return in.Documents
	}
	return true
}

// UserParts prepares user message m for a model taking in: the text to
// send, which is the context of m's text attachments and a note for each
// file the model does not take (or whose bytes were left out, Data nil:
// too large to send), followed by m's content; and the attachments to
// send as parts of their own (the images and documents the model takes),
// in m's order.
func UserParts(m Message, in Input) (string, []Attachment) {
	var b strings.Builder
	var parts []Attachment
	for _, a := range m.Attachments {
		switch {
		case a.Kind() == KindText:
			writeTextAttachment(&b, a)
		case in.Takes(a) && len(a.Data) > 0:
			parts = append(parts, a)
		case in.Takes(a):
			fmt.Fprintf(&b, "[Attached %s %s (%s, %s): too large to send to the model, so it was not sent.]\n\n",
				a.Kind(), quoteName(a.Name), a.ContentType, HumanSize(a.Size))
		default:
			fmt.Fprintf(&b, "[Attached %s %s (%s, %s): this model does not take %ss, so it was not sent.]\n\n",
				a.Kind(), quoteName(a.Name), a.ContentType, HumanSize(a.Size), a.Kind())
		}
	}
	b.WriteString(m.Content)
	return b.String(), parts
}

// writeTextAttachment frames a text attachment as context.
func writeTextAttachment(b *strings.Builder, a Attachment) {
	fmt.Fprintf(b, "<attachment name=%s type=%q size=%q>\n", quoteName(a.Name), a.ContentType, HumanSize(a.Size))
	b.WriteString(a.Text)
	if !strings.HasSuffix(a.Text, "\n") {
		b.WriteByte('\n')
	}
	if a.Cut {
		fmt.Fprintf(b, "[The file goes on: only its first %s of %s are shown.]\n", HumanSize(int64(len(a.Text))), HumanSize(a.Size))
	}
	b.WriteString("</attachment>\n\n")
}

// quoteName quotes a file name for the model, its quotes and line breaks
// made harmless.
func quoteName(name string) string {
	return `"` + strings.NewReplacer(`"`, "'", "\n", " ", "\r", " ", "<", "(", ">", ")").Replace(name) + `"`
}

// HumanSize formats n bytes for people: "512 B", "1.5 KB", "12 KB",
// "3.4 MB" (binary units).
func HumanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KB"
	if v >= unit {
		v, suffix = v/unit, "MB"
	}
	if v < 10 {
		return strings.Replace(fmt.Sprintf("%.1f %s", v, suffix), ".0 ", " ", 1)
	}
	return fmt.Sprintf("%.0f %s", v, suffix)
}

// DescribeAttachments says what atts are, for people: "1 image
// (photo.png, image/png, 12 KB) and 1 document (notes.md, text/markdown,
// 1.2 KB)"; "" for none. Text files and PDFs are documents.
func DescribeAttachments(atts []Attachment) string {
	var images, docs []string
	for _, a := range atts {
		d := fmt.Sprintf("%s, %s, %s", a.Name, a.ContentType, HumanSize(a.Size))
		if a.Kind() == KindImage {
			images = append(images, d)
		} else {
			docs = append(docs, d)
		}
	}
	var out []string
	for _, g := range []struct {
		noun  string
		items []string
	}{{"image", images}, {"document", docs}} {
		if len(g.items) == 0 {
			continue
		}
		noun := g.noun
		if len(g.items) > 1 {
			noun += "s"
		}
		out = append(out, fmt.Sprintf("%d %s (%s)", len(g.items), noun, strings.Join(g.items, "; ")))
	}
	return strings.Join(out, " and ")
}
