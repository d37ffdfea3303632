package chat

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"time"

	"github.com/workflowchat/service/shared/auth"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/httpapi"
	"github.com/workflowchat/service/shared/paging"
	"github.com/workflowchat/service/shared/ratelimit"
)

// Limits of shares.
const (
	// MaxShares bounds the shares of one chat (409 SHARE_LIMIT).
	MaxShares = 20
	// MaxShareBytes bounds a share's snapshot (the JSON of its messages),
	// which is kept in one item (409 SHARE_TOO_LARGE).
	MaxShareBytes = 300 << 10
)

// Codes of share errors.
const (
	CodeShareNotFound = "SHARE_NOT_FOUND"
	CodeShareLimit    = "SHARE_LIMIT"
	CodeShareTooLarge = "SHARE_TOO_LARGE"
)

// ShareReads limits the public reads of shares per client address.
var ShareReads = ratelimit.MustParse("share reads", "60/m,600/h")

// Share is a read-only snapshot of a chat's current path, readable by
// anyone holding its id.
type Share struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	CreatedAt time.Time `json:"createdAt"`
	// ChatID, UserID, Title and Messages are the snapshot; never part of
	// the owner's answers (Shared is the public one).
	ChatID   string          `json:"-"`
	UserID   string          `json:"-"`
	Title    string          `json:"-"`
	Messages []SharedMessage `json:"-"`
}

// SharedMessage is a message as a share shows it.
type SharedMessage struct {
	Role      string    `json:"role"`
	Content   string    `json:"content"`
	CreatedAt time.Time `json:"createdAt"`
}

// Shared is the public answer of GET /api/shares/{shareId}: nothing of
// the owner.
type Shared struct {
	Title     string          `json:"title"`
	Messages  []SharedMessage `json:"messages"`
	CreatedAt time.Time       `json:"createdAt"`
}

// ShareStore persists shares.
type ShareStore interface {
	// CreateShare stores sh, counted on its chat c, in one transaction
	// conditioned on the chat being its owner's and writable and having
	// fewer than MaxShares shares. Conflict SHARE_LIMIT; NotFound
	// CHAT_NOT_FOUND.
	CreateShare(ctx context.Context, c Chat, sh Share) error
	// Share returns share id. NotFound SHARE_NOT_FOUND.
	Share(ctx context.Context, id string) (Share, error)
	// ChatShares returns a page of chat chatID's shares, newest first.
	ChatShares(ctx context.Context, chatID string, page paging.Cursor) ([]Share, string, error)
	// DeleteShare deletes share id of chat c and its count, in one
	// transaction. NotFound SHARE_NOT_FOUND.
	DeleteShare(ctx context.Context, c Chat, id string) error
}

// shareIDPattern is the form of a share id: 22 base64url characters,
// 128 random bits.
var shareIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// newShareID returns 128 random bits, base64url.
func newShareID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// shareURL is where share id is read.
func (s *Service) shareURL(id string) string { return ShareURL(s.shareBase, id) }

// ShareURL is where share id is read under base (PUBLIC_BASE_URL, an
// origin; empty: a path), as a share's url says.
func ShareURL(base, id string) string { return base + "/api/shares/" + id }

func (s *Service) ownedChat(ctx context.Context, op, id string) (Chat, []Message, error) {
	c, msgs, err := s.store.Conversation(ctx, id)
	if err != nil {
		return Chat{}, nil, errs.Wrap(op, err)
	}
	if err := auth.Authorize(ctx, op, c.UserID); err != nil {
		return Chat{}, nil, err
	}
	return c, msgs, nil
}

// CreateShare snapshots the current path of chat id (each message's role,
// content and time, a reply not finished yet left out) and its title as
// a new share. Errors: NotFound,
// Forbidden, Conflict SHARE_LIMIT (MaxShares), SHARE_TOO_LARGE (a path
// over MaxShareBytes), Invalid SHARES_UNAVAILABLE where no share store is
// configured.
func (s *Service) CreateShare(ctx context.Context, id string) (Share, error) {
	const op = "chat.CreateShare"
	if s.shares == nil {
		return Share{}, errs.E(op, errs.Invalid, "SHARES_UNAVAILABLE", "this deployment keeps no shares")
	}
	c, msgs, err := s.ownedChat(ctx, op, id)
	if err != nil {
		return Share{}, err
	}
	path := currentPath(c, msgs)
	sh := Share{ID: newShareID(), CreatedAt: s.clock(), ChatID: c.ID, UserID: c.UserID, Title: c.Title, Messages: make([]SharedMessage, 0, len(path))}
	for _, m := range path {
		if unfinished(m) {
			continue
		}
		sh.Messages = append(sh.Messages, SharedMessage{Role: m.Role, Content: m.Content, CreatedAt: m.CreatedAt})
	}
	if b, err := json.Marshal(sh.Messages); err != nil || len(b) > MaxShareBytes {
		return Share{}, errs.E(op, errs.Conflict, CodeShareTooLarge, "this conversation is too long to share: a share holds at most 300 KiB of messages")
	}
	if err := s.shares.CreateShare(ctx, c, sh); err != nil {
		return Share{}, errs.Wrap(op, err)
	}
	sh.URL = s.shareURL(sh.ID)
	return sh, nil
}

// unfinished reports whether m is a reply not written yet: streaming, or
// paused for a tool approval. Its content is not its answer (empty, or
// what came before the paused call), and a share, kept as it was made,
// would show it so for good: a share leaves it out.
func unfinished(m Message) bool {
	return m.Status == StatusStreaming || m.Status == StatusAwaitingApproval
}

// Shares returns a page of chat id's shares. NotFound, Forbidden.
func (s *Service) Shares(ctx context.Context, id string, page paging.Cursor) ([]Share, string, error) {
	const op = "chat.Shares"
	if s.shares == nil {
		return []Share{}, "", nil
	}
	if _, err := s.Get(ctx, id); err != nil {
		return nil, "", errs.Wrap(op, err)
	}
	shares, next, err := s.shares.ChatShares(ctx, id, page)
	for i := range shares {
		shares[i].URL = s.shareURL(shares[i].ID)
	}
	return shares, next, errs.Wrap(op, err)
}

// DeleteShare revokes share shareID of chat chatID at once. NotFound
// (also SHARE_NOT_FOUND, for a share of another chat), Forbidden.
func (s *Service) DeleteShare(ctx context.Context, chatID, shareID string) error {
	const op = "chat.DeleteShare"
	if s.shares == nil {
		return errs.NotFoundf(op, CodeShareNotFound, "no such share")
	}
	c, err := s.Get(ctx, chatID)
	if err != nil {
		return errs.Wrap(op, err)
	}
	return errs.Wrap(op, s.shares.DeleteShare(ctx, c, shareID))
}

// Shared returns share id as the public reads it. NotFound
// SHARE_NOT_FOUND, also once the account that shared it is deleted.
func (s *Service) Shared(ctx context.Context, id string) (Shared, error) {
	const op = "chat.Shared"
	if s.shares == nil {
		return Shared{}, errs.NotFoundf(op, CodeShareNotFound, "no such share")
	}
	sh, err := s.shares.Share(ctx, id)
	if err != nil {
		return Shared{}, errs.Wrap(op, err)
	}
	if s.erasures != nil {
		// A deleted account's shares end with it, before its erasure
		// reaches them.
		deleted, err := s.erasures.Deleted(ctx, sh.UserID)
		if err != nil {
			return Shared{}, errs.Wrap(op, err)
		}
		if deleted {
			return Shared{}, errs.NotFoundf(op, CodeShareNotFound, "no such share")
		}
	}
	return Shared{Title: sh.Title, Messages: sh.Messages, CreatedAt: sh.CreatedAt}, nil
}

type sharesPage struct {
	Shares     []Share `json:"shares"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// pathShareID returns the shareId path parameter: 400 INVALID_ID unless
// it has the form of a share id.
func pathShareID(r *http.Request) (string, error) {
	id := r.PathValue("shareId")
	if !shareIDPattern.MatchString(id) {
		e := errs.E("chat.pathShareID", errs.Invalid, "INVALID_ID", "shareId is not a share id")
		e.Details = []errs.FieldError{{Field: "shareId", Message: "must be a share id (22 characters of A-Z, a-z, 0-9, - and _)"}}
		return "", e
	}
	return id, nil
}

func handleCreateShare(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusCreated, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Share, error) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return Share{}, err
		}
		return s.CreateShare(r.Context(), id)
	})
}

func handleListShares(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (sharesPage, error) {
		id, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return sharesPage{}, err
		}
		page, err := httpapi.ParseCursorPage(r)
		if err != nil {
			return sharesPage{}, err
		}
		shares, next, err := s.Shares(r.Context(), id, page)
		return sharesPage{Shares: shares, NextCursor: next}, err
	})
}

func handleDeleteShare(s *Service) http.Handler {
	return httpapi.Endpoint(http.StatusNoContent, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (httpapi.Empty, error) {
		chatID, err := httpapi.PathUUID(r, "chatId")
		if err != nil {
			return httpapi.Empty{}, err
		}
		id, err := pathShareID(r)
		if err != nil {
			return httpapi.Empty{}, err
		}
		return httpapi.Empty{}, s.DeleteShare(r.Context(), chatID, id)
	})
}

// handleShared answers a share to anyone, without a session, limited per
// client address by l (ShareReads), never cached (a delete revokes it at
// once).
func handleShared(s *Service, l *ratelimit.Limiter) http.Handler {
	h := httpapi.Endpoint(http.StatusOK, func(w http.ResponseWriter, r *http.Request, _ httpapi.Empty) (Shared, error) {
		w.Header().Set("Cache-Control", "no-store")
		id, err := pathShareID(r)
		if err != nil {
			return Shared{}, err
		}
		return s.Shared(r.Context(), id)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := l.Allow(r.Context(), "addr:"+auth.ClientAddress(r), ShareReads); err != nil {
			httpapi.WriteError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}
