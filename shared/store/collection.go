package store

import (
	"context"
	"errors"

	"github.com/guregu/dynamo/v2"

	"github.com/workflowchat/service/shared/errs"
)

// ownedCollection is a user's item collection in the Data table (a chat,
// a workflow): under PK, the collection's own item (SK root) carries the
// owner's userId and, while a delete runs, the deleting mark; the owner's
// counter item counts the collections. The owner is checked by the writes'
// conditions, in the store, and only a failed condition costs a read, to
// tell a missing collection from another user's.
type ownedCollection struct {
	db    *dynamo.DB
	table dynamo.Table
	// pk is the partition key of collection id; root the sort key of its
	// own item.
	pk   func(id string) string
	root string
	// counter is the key of userID's counter of such collections.
	counter func(userID string) (pk, sk string)
	// noun names the collection in the Forbidden message ("chat").
	noun     string
	notFound *errs.Error
	// unlink, when not nil, returns the deletes of the items outside the
	// collection that its own item names (a workflow's tool name), for
	// the delete's last transaction.
	unlink func(id, userID string, links rootLinks) []*dynamo.Delete
	// uncount, when not nil, returns the attributes of the owner's
	// counter item that count the collection besides n (a pinned or
	// archived chat), decremented with n by the delete.
	uncount func(links rootLinks) []string
}

// rootLinks are the attributes of a collection's own item that name items
// outside the collection.
type rootLinks struct {
	ToolName string `dynamo:"toolName"`
	// ListedIn is the collection's GSI1 partition (a chat's list).
	ListedIn string `dynamo:"GSI1PK"`
}

// ownedBy is the condition that the collection's item exists and belongs
// to the user given as its one value.
const ownedBy = "attribute_exists(PK) AND userId = ?"

// failure explains a failed owner-conditioned write on collection id with
// one consistent read: NotFound when it is gone, Forbidden when another
// user owns it.
func (c ownedCollection) failure(ctx context.Context, op, id string) error {
	var it struct{ PK string }
	err := c.table.Get("PK", c.pk(id)).Range("SK", dynamo.Equal, c.root).Project("PK").Consistent(true).One(ctx, &it)
	switch {
	case errors.Is(err, dynamo.ErrNotFound):
		return errs.Wrap(op, c.notFound)
	case err != nil:
		return storeError(op, err)
	}
	return errs.E(op, errs.Forbidden, "FORBIDDEN", "you do not have access to this "+c.noun)
}

// update runs u, an update of collection id's item, conditioned on userID
// owning it, decoding the item as updated into out. NotFound or Forbidden
// when the condition fails.
func (c ownedCollection) update(ctx context.Context, op, id, userID string, u *dynamo.Update, out any) error {
	err := u.If(ownedBy, userID).Value(ctx, out)
	if isConditionFailure(err) {
		return c.failure(ctx, op, id)
	}
	return storeError(op, err)
}

// delete removes collection id of userID: it marks the collection's item
// deleting (from then on nothing can be added: every write into the
// collection is conditioned on the mark's absence), which is also the
// owner check, runs also (when not nil: what lives outside the collection
// and goes with it, e.g. a workflow's runs), batch-deletes every other
// item, then deletes the collection's item and decrements the owner's
// counter in one transaction conditioned on the owner (with the items
// unlink names). A failure part-way leaves the collection's item in
// place, so retrying the delete finishes it and nothing is orphaned.
// NotFound, Forbidden, or also's error.
func (c ownedCollection) delete(ctx context.Context, op, id, userID string, also func(context.Context) error) error {
	var links rootLinks
	err := c.table.Update("PK", c.pk(id)).Range("SK", c.root).Set("deleting", true).If(ownedBy, userID).Value(ctx, &links)
	if isConditionFailure(err) {
		return c.failure(ctx, op, id)
	}
	if err != nil {
		return storeError(op, err)
	}
	if also != nil {
		if err := also(ctx); err != nil {
			return errs.Wrap(op, err)
		}
	}
	if err := deleteCollection(ctx, c.table, c.pk(id), c.root); err != nil {
		return errs.Wrap(op, err)
	}
	pk, sk := c.counter(userID)
	counter := c.table.Update("PK", pk).Range("SK", sk).Add("n", -1)
	if c.uncount != nil {
		for _, attr := range c.uncount(links) {
			counter.Add(attr, -1)
		}
	}
	tx := c.db.WriteTx().
		Delete(c.table.Delete("PK", c.pk(id)).Range("SK", c.root).If("userId = ?", userID)).
		Update(counter)
	if c.unlink != nil {
		for _, d := range c.unlink(id, userID, links) {
			tx.Delete(d)
		}
	}
	err = tx.Run(ctx)
	if isConditionFailure(err) {
		return c.failure(ctx, op, id)
	}
	return storeError(op, err)
}
