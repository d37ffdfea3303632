package chat

import (
	"context"
	"strings"
	"time"
	"unicode"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/model"
)

// Bounds of a chat's title made from its first exchange.
const (
	// titleWords is how many words of the first message a title keeps
	// (the built-in model's title, and every fallback).
	titleWords = 6
	// titleTokens bounds the output of a model's title call.
	titleTokens = 20
	// titleTimeout bounds a model's title call.
	titleTimeout = 15 * time.Second
)

// titlePrompt asks a model for a chat's title.
const titlePrompt = "Write a title of at most six words for the conversation below. " +
	"Answer with the title alone: no quotes, no final period.\n\n"

// autoTitle titles chat c, still DefaultTitle, from its exchange user ->
// reply: with the built-in model the first words of the user message;
// with another model a short title call (metered as every model call:
// the user's budget is reserved and its usage recorded), falling back to
// the first words when it fails or answers nothing. The title is stored
// only while the chat is still DefaultTitle (a rename meanwhile wins).
// Failures are logged: a title never fails a reply.
func (s *Service) autoTitle(ctx context.Context, c Chat, user, reply Message, modelID string) {
	if c.Title != DefaultTitle || user.Content == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), titleTimeout)
	defer cancel()
	title := cleanTitle(firstWords(user.Content, titleWords))
	if m, err := s.models.Lookup(modelID); err == nil && m.Provider != model.BuiltinID {
		req := model.Request{ModelID: modelID, MaxTokens: titleTokens, Messages: []model.Message{{Role: model.RoleUser,
			Content: titlePrompt + "User: " + firstWords(user.Content, 200) + "\n\nAssistant: " + firstWords(reply.Content, 200)}}}
		var b strings.Builder
		_, err := s.usage.Generate(ctx, s.models, c.UserID, req, nil, func(ch model.Chunk) error {
			b.WriteString(ch.Delta)
			return nil
		})
		if t := cleanTitle(b.String()); err == nil && t != "" {
			title = t
		} else if err != nil {
			logWarn(ctx, "title call failed; titled from the first words", "chatId", c.ID, "err", err.Error())
		}
	}
	if title == "" {
		return
	}
	if err := s.store.AutoTitle(ctx, c.ID, title); err != nil {
		logWarn(ctx, "store the chat's title", "chatId", c.ID, "err", err.Error())
	}
}

// firstWords returns the first n words of s, joined by spaces.
func firstWords(s string, n int) string {
	w := strings.Fields(s)
	return strings.Join(w[:min(n, len(w))], " ")
}

// cleanTitle returns a title (a model's, or the first words of a
// message) on one line, without the quotes and final punctuation models
// add, cut to MaxTitleLen characters: a title PATCH would take
// (validateTitle). Its first line is kept, every other control character
// (an escape sequence's ESC, a bell, a tab) is a space, and runs of
// spaces are one.
func cleanTitle(s string) string {
	if i := strings.IndexAny(strings.TrimSpace(s), "\r\n"); i > 0 {
		s = strings.TrimSpace(s)[:i]
	}
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if errs.IsControl(r) {
			return ' '
		}
		return r
	}, s)), " ")
	s = strings.TrimFunc(strings.TrimSpace(s), func(r rune) bool {
		return unicode.IsPunct(r) && r != ')' && r != '?' && r != '!' || unicode.IsSpace(r)
	})
	s = strings.TrimPrefix(s, "Title: ")
	if r := []rune(s); len(r) > MaxTitleLen {
		s = strings.TrimSpace(string(r[:MaxTitleLen]))
	}
	return s
}
