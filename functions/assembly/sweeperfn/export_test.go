package sweeperfn_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workflowchat/service/functions/assembly"
	"github.com/workflowchat/service/functions/assembly/sweeperfn"
	"github.com/workflowchat/service/shared/attachment"
	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/blob"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/config"
	"github.com/workflowchat/service/shared/export"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// TestExportSettlesPendingAttachments: an attachment uploaded but never
// read (still pending in the table: attachments settle at their first
// read) is exported with its bytes and status ready, as a read would
// have made it.
func TestExportSettlesPendingAttachments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	cfg, err := config.Load(db.Env(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := blob.NewLocal(blob.NewMemory(nil), blob.LocalOptions{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	d := assembly.Deps{DB: db.DB, Blobs: blobs}
	uid := uuid.NewString()
	now := time.Now().UTC()
	u := auth.User{ID: uid, Email: uid + "@example.com", Name: "Ada", CreatedAt: now, UpdatedAt: now}
	if err := d.Users(cfg).CreateUser(ctx, u, "x", auth.Session{TokenHash: uuid.NewString(), User: u, CreatedAt: now, RenewedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	c := chat.Chat{ID: uuid.NewString(), UserID: uid, Title: "c", CreatedAt: now, UpdatedAt: now}
	if err := store.NewChats(db.DB, cfg.DataTable).CreateChat(ctx, c); err != nil {
		t.Fatal(err)
	}
	body := []byte("name,age\nada,36\n")
	size := int64(len(body))
	atts := attachment.NewService(attachment.Options{Store: store.NewAttachments(db.DB, cfg.DataTable), Blobs: blobs})
	a, err := atts.Create(auth.ActingFor(ctx, uid), c.ID, attachment.CreateRequest{Name: "people.csv", ContentType: "text/csv", Size: &size})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blob.PutBytes(ctx, blobs, attachment.UploadKey(uid, a.ID), body, "text/csv"); err != nil {
		t.Fatal(err)
	}

	exports := store.NewExports(db.DB, cfg.DataTable)
	e := export.Export{ID: uuid.NewString(), UserID: uid, Status: export.Pending, CreatedAt: now}
	if err := exports.CreateExport(ctx, e); err != nil {
		t.Fatal(err)
	}
	if _, err := sweeperfn.Exporter(cfg, d, blobs).Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := exports.Export(ctx, uid, e.ID); err != nil || got.Status != export.Completed {
		t.Fatalf("export %+v, %v; want completed", got, err)
	}
	obj, err := blobs.Get(ctx, export.Key(uid, e.ID))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		files[f.Name], _ = io.ReadAll(rc)
		rc.Close()
	}
	dir := "chats/" + c.ID + "/"
	if got := files[dir+"attachments/"+a.ID+"/people.csv"]; !bytes.Equal(got, body) {
		t.Errorf("attachment bytes %q, want %q", got, body)
	}
	var cj struct {
		Attachments []attachment.Attachment `json:"attachments"`
	}
	if err := json.Unmarshal(files[dir+"chat.json"], &cj); err != nil || len(cj.Attachments) != 1 || cj.Attachments[0].Status != attachment.StatusReady {
		t.Errorf("chat.json attachments %+v, %v; want one ready", cj.Attachments, err)
	}
}
