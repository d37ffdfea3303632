package model_test

import (
	"context"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/model"
)

var (
	photo = model.Attachment{Name: "photo.png", ContentType: "image/png", Size: 12 * 1024, Data: []byte("\x89PNG...")}
	notes = model.Attachment{Name: "notes.md", ContentType: "text/markdown", Size: 1229, Text: "# Notes\nbuy milk"}
	paper = model.Attachment{Name: "paper.pdf", ContentType: "application/pdf", Size: 3 << 20, Data: []byte("%PDF-1.7")}
	data  = model.Attachment{Name: `we"ird<name>.json`, ContentType: "application/json", Size: 5000, Text: `{"a":1}`, Cut: true}
)

func TestHumanSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KB", 1229: "1.2 KB", 12 * 1024: "12 KB", 10*1024 - 1: "10 KB",
		5 << 20: "5 MB", 25 << 20: "25 MB", 1536 * 1024: "1.5 MB"} {
		if got := model.HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDescribeAttachments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		atts []model.Attachment
		want string
	}{
		{nil, ""},
		{[]model.Attachment{photo, notes}, "1 image (photo.png, image/png, 12 KB) and 1 document (notes.md, text/markdown, 1.2 KB)"},
		{[]model.Attachment{notes, paper}, "2 documents (notes.md, text/markdown, 1.2 KB; paper.pdf, application/pdf, 3 MB)"},
		{[]model.Attachment{photo, photo}, "2 images (photo.png, image/png, 12 KB; photo.png, image/png, 12 KB)"},
	}
	for _, tt := range tests {
		if got := model.DescribeAttachments(tt.atts); got != tt.want {
			t.Errorf("DescribeAttachments = %q, want %q", got, tt.want)
		}
	}
}

func TestUserParts(t *testing.T) {
	t.Parallel()
	m := model.Message{Role: model.RoleUser, Content: "What is in these?", Attachments: []model.Attachment{photo, notes, paper, data}}

	text, parts := model.UserParts(m, model.Input{Images: true, Documents: true})
	if len(parts) != 2 || parts[0].Name != "photo.png" || parts[1].Name != "paper.pdf" {
		t.Fatalf("parts for a model taking everything: %+v", parts)
	}
	for _, want := range []string{
		"<attachment name=\"notes.md\" type=\"text/markdown\" size=\"1.2 KB\">\n# Notes\nbuy milk\n</attachment>",
		`<attachment name="we'ird(name).json" type="application/json" size="4.9 KB">`,
		"[The file goes on: only its first 7 B of 4.9 KB are shown.]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if !strings.HasSuffix(text, "What is in these?") || strings.Contains(text, "not sent") {
		t.Errorf("text:\n%s", text)
	}

	text, parts = model.UserParts(m, model.Input{})
	if len(parts) != 0 {
		t.Fatalf("parts for a text-only model: %+v", parts)
	}
	for _, want := range []string{
		`[Attached image "photo.png" (image/png, 12 KB): this model does not take images, so it was not sent.]`,
		`[Attached document "paper.pdf" (application/pdf, 3 MB): this model does not take documents, so it was not sent.]`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	// An image whose bytes were left out (too large) gets a note.
	big := photo
	big.Data = nil
	text, parts = model.UserParts(model.Message{Role: model.RoleUser, Content: "x", Attachments: []model.Attachment{big}}, model.Input{Images: true})
	if len(parts) != 0 || !strings.Contains(text, `[Attached image "photo.png" (image/png, 12 KB): too large to send to the model`) {
		t.Errorf("image without bytes: %q %v", text, parts)
	}
	// No attachments: the content as it is.
	if text, parts := model.UserParts(model.Message{Role: model.RoleUser, Content: "hi"}, model.Input{}); text != "hi" || parts != nil {
		t.Errorf("plain message: %q %v", text, parts)
	}
}

func TestBuiltinSaysWhatItReceived(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	req := model.Request{ModelID: model.BuiltinID, Messages: []model.Message{{Role: model.RoleUser, Content: "look", Attachments: []model.Attachment{photo, notes}}}}
	res, err := model.Builtin{}.Generate(context.Background(), req, func(c model.Chunk) error { b.WriteString(c.Delta); return nil })
	if err != nil {
		t.Fatal(err)
	}
	want := "I received 1 image (photo.png, image/png, 12 KB) and 1 document (notes.md, text/markdown, 1.2 KB). "
	if !strings.HasPrefix(b.String(), want) {
		t.Fatalf("reply %q, want it to start with %q", b.String(), want)
	}
	plain, _ := model.Builtin{}.Generate(context.Background(), model.Request{ModelID: model.BuiltinID, Messages: []model.Message{{Role: model.RoleUser, Content: "look"}}},
		func(model.Chunk) error { return nil })
	if res.Usage.InputTokens <= plain.Usage.InputTokens {
		t.Errorf("attachments cost no input tokens: %d vs %d", res.Usage.InputTokens, plain.Usage.InputTokens)
	}
}
