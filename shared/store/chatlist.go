package store

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/chat"
	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/paging"
)

// A user's chats are listed from three GSI1 partitions: the pinned ones
// (USER#<id>#PINNED), the others (USER#<id>#CHATS, which also holds the
// user's chat counter) and the archived ones (USER#<id>#ARCHIVED, pinned
// or not), each by updatedAt. A message written to a chat moves its
// GSI1SK (the time) and never its GSI1PK, which only PATCH moves: a
// message racing a pin cannot file the chat under the wrong state. The
// counter counts all of them (n) and, apart, the pinned (nPinned) and the
// archived (nArchived), so a page knows which partitions it spans.
func pinnedChatsGSI(userID string) string   { return "USER#" + userID + "#PINNED" }
func archivedChatsGSI(userID string) string { return "USER#" + userID + "#ARCHIVED" }

// Counter attributes of the pinned and the archived chats.
const (
	pinnedCount   = "nPinned"
	archivedCount = "nArchived"
)

// chatListGSI is the GSI1 partition chat c is listed in.
func chatListGSI(c chat.Chat) string {
	switch {
	case c.Archived:
		return archivedChatsGSI(c.UserID)
	case c.Pinned:
		return pinnedChatsGSI(c.UserID)
	}
	return userChatsGSI(c.UserID)
}

// countOf is the counter attribute counting the chats of GSI1 partition
// gsiPK besides n, if any.
func countOf(gsiPK string, userID string) string {
	switch gsiPK {
	case pinnedChatsGSI(userID):
		return pinnedCount
	case archivedChatsGSI(userID):
		return archivedCount
	}
	return ""
}

// chatListCounts is the chats' ownedCollection.uncount: the pinned or
// archived count of a chat listed there.
func chatListCounts(l rootLinks) []string {
	for _, attr := range []struct{ suffix, name string }{{"#PINNED", pinnedCount}, {"#ARCHIVED", archivedCount}} {
		if n := len(l.ListedIn); n > len(attr.suffix) && l.ListedIn[n-len(attr.suffix):] == attr.suffix {
			return []string{attr.name}
		}
	}
	return nil
}

// updateAttempts bounds the reads and conditional writes of one
// UpdateChat that meets concurrent writes to the chat.
const updateAttempts = 5

// UpdateChat applies u to the chat id owned by userID: a new title moves
// its updatedAt to now; pinned and archived move it between the lists
// (see chatListGSI) with the counts, in one transaction conditioned on
// the chat's list entry being as read (a concurrent write retries, up to
// updateAttempts). NotFound, Forbidden, or Unavailable after the attempts.
func (s *Chats) UpdateChat(ctx context.Context, id, userID string, u chat.ChatUpdate, now time.Time) (chat.Chat, error) {
	const op = "store.UpdateChat"
	if u.Title != nil && u.Pinned == nil && u.Archived == nil && u.KnowledgeBaseIDs == nil {
		// A rename moves no chat between lists: one conditional
		// UpdateItem, its sort key in the list it is in.
		var it chatItem
		upd := s.table.Update("PK", chatPK(id)).Range("SK", chatSK).
			Set("title", *u.Title).Set("updatedAt", now).Set("GSI1SK", now.UTC().Format(timeKey)+"#"+id)
		if err := s.owned.update(ctx, op, id, userID, upd, &it); err != nil {
			return chat.Chat{}, err
		}
		return it.chat(), nil
	}
	for range updateAttempts {
		var it struct {
			chatItem
			Deleting bool `dynamo:"deleting"`
		}
		err := s.table.Get("PK", chatPK(id)).Range("SK", dynamo.Equal, chatSK).Consistent(true).One(ctx, &it)
		switch {
		case errors.Is(err, dynamo.ErrNotFound) || (err == nil && it.Deleting):
			return chat.Chat{}, errs.Wrap(op, errChatNotFound)
		case err != nil:
			return chat.Chat{}, storeError(op, err)
		case it.UserID != userID:
			return chat.Chat{}, errs.E(op, errs.Forbidden, "FORBIDDEN", "you do not have access to this chat")
		}
		c := it.chat()
		if u.Title != nil {
			c.Title, c.UpdatedAt = *u.Title, now
		}
		if u.Pinned != nil {
			c.Pinned = *u.Pinned
		}
		if u.Archived != nil {
			c.Archived = *u.Archived
		}
		if u.KnowledgeBaseIDs != nil {
			c.KnowledgeBaseIDs = *u.KnowledgeBaseIDs
		}
		list := chatListGSI(c)
		upd := s.table.Update("PK", chatPK(id)).Range("SK", chatSK).
			Set("title", c.Title).Set("updatedAt", c.UpdatedAt).Set("GSI1PK", list).Set("GSI1SK", chatGSISK(c)).
			If(collectionWritable+" AND userId = ? AND GSI1PK = ? AND GSI1SK = ?", userID, it.GSI1PK, it.GSI1SK)
		if len(c.KnowledgeBaseIDs) > 0 {
			upd.Set("knowledgeBaseIds", c.KnowledgeBaseIDs)
		} else {
			upd.Remove("knowledgeBaseIds")
		}
		for attr, on := range map[string]bool{"pinned": c.Pinned, "archived": c.Archived} {
			if on {
				upd.Set(attr, true)
			} else {
				upd.Remove(attr)
			}
		}
		if list == it.GSI1PK {
			// Nothing moves between lists: no counter, no transaction.
			err = upd.Run(ctx)
			if isConditionFailure(err) {
				continue
			}
			if err != nil {
				return chat.Chat{}, storeError(op, err)
			}
			return c, nil
		}
		tx := s.db.WriteTx().Update(upd)
		{
			pk, sk := chatCounterKey(userID)
			counter := s.table.Update("PK", pk).Range("SK", sk)
			changed := false
			if from := countOf(it.GSI1PK, userID); from != "" {
				counter.Add(from, -1)
				changed = true
			}
			if to := countOf(list, userID); to != "" {
				counter.Add(to, 1)
				changed = true
			}
			if changed {
				tx.Update(counter)
			}
		}
		err = tx.Run(ctx)
		if isConditionFailure(err) {
			continue // written meanwhile: read it again
		}
		if err != nil {
			return chat.Chat{}, storeError(op, err)
		}
		return c, nil
	}
	return chat.Chat{}, errs.E(op, errs.Unavailable, "STORAGE_UNAVAILABLE", "the chat is being changed by other requests; retry shortly")
}

// AutoTitle sets the title of chat id to title if it is still
// chat.DefaultTitle, without moving its updatedAt (one conditional
// update). It does nothing, without an error, when the chat was renamed
// or is gone.
func (s *Chats) AutoTitle(ctx context.Context, id, title string) error {
	const op = "store.AutoTitle"
	err := s.table.Update("PK", chatPK(id)).Range("SK", chatSK).Set("title", title).
		If(collectionWritable+" AND title = ?", chat.DefaultTitle).Run(ctx)
	if isConditionFailure(err) {
		return nil
	}
	return storeError(op, err)
}

// chatCounts are the values of a user's chat counter item.
type chatCounts struct {
	N         int `dynamo:"n"`
	NPinned   int `dynamo:"nPinned"`
	NArchived int `dynamo:"nArchived"`
}

// ListChats returns a page of userID's chats, the pinned first, then the
// others, each most recently updated first; the archived ones (last) only
// with archived. The total is the number of chats the list holds. One
// Query of the user's main list (which holds the counter), and one more
// of each other list the page reaches into.
func (s *Chats) ListChats(ctx context.Context, userID string, page paging.Page, archived bool) ([]chat.Chat, int, error) {
	const op = "store.ListChats"
	main, counts, err := s.listPart(ctx, userChatsGSI(userID), page.End())
	if err != nil {
		return nil, 0, errs.Wrap(op, err)
	}
	pinned, rest := counts.NPinned, counts.N-counts.NPinned-counts.NArchived
	total := counts.N - counts.NArchived
	if archived {
		total = counts.N
	}
	// The page's window over the concatenation pinned, main, archived.
	parts := []struct {
		gsi   string
		count int
		items []chatItem // main's are read already
	}{{pinnedChatsGSI(userID), pinned, nil}, {"", rest, main}}
	if archived {
		parts = append(parts, struct {
			gsi   string
			count int
			items []chatItem
		}{archivedChatsGSI(userID), counts.NArchived, nil})
	}
	out := make([]chat.Chat, 0, page.Limit)
	skip, take := page.Offset, page.Limit
	for _, p := range parts {
		if take == 0 {
			break
		}
		if skip >= p.count && p.gsi != "" {
			skip -= p.count
			continue
		}
		items := p.items
		if p.gsi != "" {
			if items, _, err = s.listPart(ctx, p.gsi, skip+take); err != nil {
				return nil, 0, errs.Wrap(op, err)
			}
		}
		if skip >= len(items) {
			skip -= min(skip, p.count)
			continue
		}
		items = items[skip:]
		skip = 0
		n := min(len(items), take)
		for _, it := range items[:n] {
			out = append(out, it.chat())
		}
		take -= n
	}
	return out, total, nil
}

// listPart reads the first n chats of GSI1 partition gsiPK, most recently
// updated first, and the counter item's values when the partition holds
// it (its GSI1SK sorts first), in one Query.
func (s *Chats) listPart(ctx context.Context, gsiPK string, n int) ([]chatItem, chatCounts, error) {
	const op = "store.listPart"
	var raw []dynamo.Item
	if err := s.table.Get("GSI1PK", gsiPK).Index("GSI1").Order(dynamo.Descending).Limit(n+1).All(ctx, &raw); err != nil {
		return nil, chatCounts{}, storeError(op, err)
	}
	var (
		counts chatCounts
		out    []chatItem
	)
	for _, it := range raw {
		if sk, ok := it["GSI1SK"].(*types.AttributeValueMemberS); ok && sk.Value == counterGSISK {
			if err := dynamo.UnmarshalItem(it, &counts); err != nil {
				return nil, chatCounts{}, errs.Wrap(op, err)
			}
			continue
		}
		if len(out) < n {
			var c chatItem
			if err := dynamo.UnmarshalItem(it, &c); err != nil {
				return nil, chatCounts{}, errs.Wrap(op, err)
			}
			out = append(out, c)
		}
	}
	return out, counts, nil
}
