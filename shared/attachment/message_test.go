package attachment_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

// TestForMessage: a message's attachments come back in the order asked,
// as the model reads them; a pending one whose upload arrived is checked
// on the way; the error answered is the first failing id's, in order,
// whatever finishes first; another chat's or another user's attachment is
// not found.
func TestForMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, 0)
	ctx := context.Background()
	c := e.chat(t, "ada")
	other := e.chat(t, "ada")
	bobs := e.chat(t, "bob")
	uploaded := func(chatID, user, name, ct string, data []byte) attachment.Attachment {
		a := e.create(t, user, chatID, name, ct, len(data))
		put(t, a.UploadURL, a.UploadHeaders, data)
		return a // pending until read
	}
	txt := uploaded(c.ID, "ada", "notes.md", "text/markdown", []byte("# notes"))
	img := uploaded(c.ID, "ada", "cat.png", "image/png", png)
	notYet := e.create(t, "ada", c.ID, "later.txt", "text/plain", 3)
	bad := uploaded(c.ID, "ada", "fake.png", "image/png", []byte("text!"))
	elsewhere := uploaded(other.ID, "ada", "other.txt", "text/plain", []byte("other"))
	bobFile := uploaded(bobs.ID, "bob", "bob.txt", "text/plain", []byte("bob's"))

	got, err := e.svc.ForMessage(ctx, "ada", c.ID, []string{img.ID, txt.ID}, model.Input{Images: true})
	if err != nil || len(got) != 2 || got[0].Name != "cat.png" || !bytes.Equal(got[0].Data, png) || got[1].Text != "# notes" || got[1].Cut {
		t.Fatalf("ForMessage: %+v %v", got, err)
	}
	if got, err := e.svc.ForMessage(ctx, "ada", c.ID, []string{img.ID}, model.Input{}); err != nil || got[0].Data != nil {
		t.Fatalf("an image for a model without images: %+v %v", got, err)
	}
	for _, tt := range []struct {
		name string
		ids  []string
		kind errs.Kind
		code string
	}{
		{"not uploaded", []string{txt.ID, notYet.ID, bad.ID}, errs.Conflict, attachment.CodeNotReady},
		{"failed before not uploaded", []string{bad.ID, notYet.ID}, errs.Conflict, attachment.CodeFailed},
		{"another chat's", []string{elsewhere.ID, notYet.ID}, errs.NotFound, attachment.CodeNotFound},
		{"another user's", []string{txt.ID, bobFile.ID}, errs.NotFound, attachment.CodeNotFound},
		{"unknown", []string{"00000000-0000-4000-8000-000000000001"}, errs.NotFound, attachment.CodeNotFound},
	} {
		for range 3 { // the same answer every time
			_, err := e.svc.ForMessage(ctx, "ada", c.ID, tt.ids, model.Input{Images: true})
			wantCode(t, tt.name, err, tt.kind, tt.code)
		}
	}
	if got, err := e.svc.ForMessage(ctx, "ada", c.ID, nil, model.Input{}); err != nil || len(got) != 0 {
		t.Errorf("no ids: %+v %v", got, err)
	}
}
