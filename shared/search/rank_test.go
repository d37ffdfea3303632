package search

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestImpactOrdersLikeBM25: for a word once in each message (most of a
// chat's postings), Impact orders messages as BM25 does whatever the
// user's mean length; it stays within the five digits of the sort key.
func TestImpactOrdersLikeBM25(t *testing.T) {
	t.Parallel()
	for _, avg := range []float64{3, 12, ImpactLength, 150, 900} {
		for l := 1; l < 5000; l++ {
			if Impact(1, l) < Impact(1, l+1) || termWeight(1, float64(l), avg) < termWeight(1, float64(l+1), avg) {
				t.Fatalf("avg %v: length %d weighs less than %d", avg, l, l+1)
			}
		}
	}
	for _, c := range []struct{ f, l int }{{1, 1}, {500, 500}, {32000, 32000}, {1, 32000}} {
		if i := Impact(c.f, c.l); i < 0 || i > ImpactMax {
			t.Errorf("Impact(%d, %d) = %d, out of 0..%d", c.f, c.l, i, ImpactMax)
		}
	}
}

// TestTopPostingsRankLikeAll: a word in 5,000 of 10,000 messages ranked
// over its TopPostings best postings (by Impact), with its full count for
// its idf, gives the first pages the ranking over all of them gives, for
// messages shorter and longer than ImpactLength on average.
func TestTopPostingsRankLikeAll(t *testing.T) {
	t.Parallel()
	for _, spread := range []int{20, 60, 300, 1000} {
		rng := rand.New(rand.NewPCG(3, uint64(spread)))
		var all []Posting
		length := int64(0)
		for i := range 10000 {
			l := 3 + rng.IntN(spread)
			length += int64(l)
			if i%2 == 0 {
				continue
			}
			f := 1
			if rng.IntN(10) == 0 {
				f = 2 + rng.IntN(3)
			}
			all = append(all, Posting{ChatID: fmt.Sprintf("c%03d", i/20), MessageID: fmt.Sprintf("m%05d", i), Freq: f, Length: l})
		}
		stats := Stats{Docs: 10000, Length: length}
		sort.SliceStable(all, func(i, j int) bool { return Impact(all[i].Freq, all[i].Length) > Impact(all[j].Freq, all[j].Length) })
		full := rank(stats, []termList{{postings: all, df: int64(len(all))}})
		top := rank(stats, []termList{{postings: all[:TopPostings], df: int64(len(all))}})
		const pages = 60 // three pages of 20
		chats := func(s []scored) []string {
			var out []string
			for _, r := range s[:pages] {
				out = append(out, r.ChatID+"/"+r.MessageID)
			}
			return out
		}
		if !slices.Equal(chats(full), chats(top)) {
			t.Errorf("lengths 3 to %d: the best %d chats differ:\nall %v\ntop %v", 3+spread, pages, chats(full), chats(top))
		}
	}
}
