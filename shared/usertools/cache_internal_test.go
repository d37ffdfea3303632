package usertools

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/workflowchat/service/shared/mcpserver"
)

// bigLists answers every user 20 servers of 256 tools each with long
// descriptions: the largest list a user may have stored.
type bigLists struct{}

func (bigLists) Servers(_ context.Context, userID string) ([]mcpserver.Server, error) {
	list := make([]mcpserver.Server, mcpserver.MaxServers)
	for i := range list {
		tools := make([]mcpserver.Tool, mcpserver.MaxTools)
		for j := range tools {
			tools[j] = mcpserver.Tool{Name: fmt.Sprintf("t%d", j), Description: strings.Repeat("d", 700), InputSchema: []byte(`{"type":"object"}`)}
		}
		list[i] = mcpserver.Server{ID: fmt.Sprintf("%s-%d", userID, i), Name: fmt.Sprintf("s%d", i), Tools: tools}
	}
	return list, nil
}

// TestKeptListsStayWithinTheirBytes: however many users with the largest
// tool lists a process serves, what it keeps stays within
// maxCachedBytes, and the lists are still answered whole.
func TestKeptListsStayWithinTheirBytes(t *testing.T) {
	t.Parallel()
	c := New(Options{Servers: bigLists{}})
	per := listSize(must(bigLists{}.Servers(t.Context(), "u")))
	if per*maxUsers <= maxCachedBytes {
		t.Fatalf("a user's largest list is %d bytes: the users' bound alone would hold it", per)
	}
	for i := range 3 * maxCachedBytes / per {
		list, err := c.remote(t.Context(), fmt.Sprintf("user-%d", i))
		if err != nil || len(list) != mcpserver.MaxServers {
			t.Fatalf("user %d: %d servers, %v", i, len(list), err)
		}
		c.mu.Lock()
		sum := 0
		for _, e := range c.users {
			sum += e.size
		}
		bytes, users := c.bytes, len(c.users)
		c.mu.Unlock()
		if bytes != sum || bytes > maxCachedBytes || users == 0 {
			t.Fatalf("after user %d: %d users kept, %d bytes counted, %d summed, bound %d", i, users, bytes, sum, maxCachedBytes)
		}
	}
	c.Forget("user-0")
	c.Forget(fmt.Sprintf("user-%d", 3*maxCachedBytes/per-1))
	c.mu.Lock()
	sum := 0
	for _, e := range c.users {
		sum += e.size
	}
	if c.bytes != sum {
		t.Errorf("after Forget: %d bytes counted, %d summed", c.bytes, sum)
	}
	c.mu.Unlock()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
