package chat_test

import (
	"context"
	"strings"
	"testing"
	"unicode"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/model"
	"github.com/workflowchat/service/shared/store"
	"github.com/workflowchat/service/shared/store/storetest"
)

// titler answers every call with its text: the reply, and the title call.
type titler struct{ text string }

func (p titler) Models() []model.Model {
	return []model.Model{{ID: "titler", Name: "titler", Provider: "test"}}
}

func (p titler) Generate(ctx context.Context, req model.Request, emit func(model.Chunk) error) (model.Result, error) {
	return model.Result{Usage: model.Usage{InputTokens: 1, OutputTokens: 1}}, emit(model.Chunk{Delta: p.text})
}

// TestTitleHasNoControlCharacters: a title made from the first exchange,
// the built-in model's (the message's first words) as another model's
// (its title call), is one PATCH would take: the control characters of a
// terminal escape sequence, a bell or a tab are spaces.
func TestTitleHasNoControlCharacters(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	models, err := model.NewRegistry(model.Builtin{}, titler{text: "\"Red\x1b[0m\tAlert\x07\u0085 now\"\n"})
	if err != nil {
		t.Fatal(err)
	}
	svc := chat.NewService(chat.Options{Store: store.NewChats(db.DB, db.Data()), Models: models, DefaultModelID: "builtin"})
	ctx := auth.ActingFor(context.Background(), "u1")
	for _, c := range []struct{ modelID, content, want string }{
		{"builtin", "hi\u001b[31mred\u0007 there", "hi [31mred there"},
		{"builtin", "\x00\x01 a\tb\x7fc d e f g h", "a b c d e f"},
		{"titler", "anything", "Red [0m Alert now"},
	} {
		ch, err := svc.Create(ctx, chat.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Send(ctx, ch.ID, chat.MessageRequest{Content: c.content, ModelID: c.modelID}); err != nil {
			t.Fatalf("%s %q: %v", c.modelID, c.content, err)
		}
		got, err := svc.Get(ctx, ch.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Title != c.want || strings.ContainsFunc(got.Title, unicode.IsControl) {
			t.Errorf("%s %q: title %q, want %q", c.modelID, c.content, got.Title, c.want)
		}
		title := got.Title
		if err := (chat.UpdateRequest{Title: &title}).Validate(); err != nil {
			t.Errorf("%s %q: PATCH refuses the title %q: %v", c.modelID, c.content, got.Title, err)
		}
	}
}
