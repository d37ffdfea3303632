package main

import (
	"fmt"
	"slices"
	"time"
)

// The soak mode runs the mix for longer at low concurrency and watches the
// dev server's resident set size (RSS).
//
// Why the check is "RSS after warm-up does not keep growing" and not "RSS
// stays flat": the embedded store keeps every item in memory, so a mix
// that only creates would grow the process with its data, leak or no leak.
// The mix therefore deletes what it creates: each user keeps at most
// maxChatsPerUser chats of at most ~maxChatMessages messages (older chats
// are deleted with their messages), signs out before signing in again (the
// session item is deleted), and a workflow is deleted after its run. After
// warm-up the data volume is flat (users x chats x messages), so RSS must
// plateau; what remains is the Go heap's own breathing (GC cycles, the
// scavenger returning memory lazily), hence a generous limit.

// MemorySample is one RSS reading.
type MemorySample struct {
	At  Millis `json:"atMs"` // since the load started
	RSS int64  `json:"rssBytes"`
}

// MemoryReport is the dev server's RSS over a run.
type MemoryReport struct {
	Samples     []MemorySample `json:"samples"`
	Warmup      Millis         `json:"warmupMs"`
	Start       int64          `json:"startBytes"`       // before the load
	AfterWarmup int64          `json:"afterWarmupBytes"` // the first sample after warm-up
	Peak        int64          `json:"peakBytes"`
	End         int64          `json:"endBytes"`
	Growth      int64          `json:"growthBytes"`  // End - AfterWarmup
	Allowed     int64          `json:"allowedBytes"` // the growth limit (soak)
	Checked     bool           `json:"checked"`      // soak mode: Growth was held to Allowed
	Failed      bool           `json:"failed"`
}

// minAllowedGrowth is the least RSS growth after warm-up a soak tolerates.
const minAllowedGrowth = 32 << 20

// evaluateMemory summarises samples (in time order). With check, it fails
// when RSS grew after warm-up by more than half the after-warm-up RSS or
// 32 MiB, whichever is more.
func evaluateMemory(samples []MemorySample, warmup time.Duration, check bool) *MemoryReport {
	m := &MemoryReport{Samples: samples, Warmup: Millis(warmup), Checked: check}
	if len(samples) == 0 {
		return m
	}
	m.Start, m.End = samples[0].RSS, samples[len(samples)-1].RSS
	m.AfterWarmup = m.End
	if i := slices.IndexFunc(samples, func(s MemorySample) bool { return time.Duration(s.At) >= warmup }); i >= 0 {
		m.AfterWarmup = samples[i].RSS
	}
	for _, s := range samples {
		m.Peak = max(m.Peak, s.RSS)
	}
	m.Growth = m.End - m.AfterWarmup
	m.Allowed = max(minAllowedGrowth, m.AfterWarmup/2)
	m.Failed = check && m.Growth > m.Allowed
	return m
}

// Summary is one markdown paragraph.
func (m *MemoryReport) Summary() string {
	s := fmt.Sprintf("Dev server RSS (%d samples): start %s, after %.0f s warm-up %s, peak %s, end %s; growth after warm-up %s.",
		len(m.Samples), mib(m.Start), time.Duration(m.Warmup).Seconds(), mib(m.AfterWarmup), mib(m.Peak), mib(m.End), mib(m.Growth))
	switch {
	case m.Failed:
		s += fmt.Sprintf(" **FAILED**: more than the allowed %s.", mib(m.Allowed))
	case m.Checked:
		s += fmt.Sprintf(" Within the allowed %s.", mib(m.Allowed))
	}
	return s
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// sampleRSS reads pid's RSS every interval until stop is closed, then once
// more, and returns the samples with their times since start.
func sampleRSS(pid int, start time.Time, interval time.Duration, stop <-chan struct{}) []MemorySample {
	var out []MemorySample
	read := func() {
		if rss, err := rssBytes(pid); err == nil {
			out = append(out, MemorySample{At: Millis(time.Since(start)), RSS: rss})
		}
	}
	read()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			read()
			return out
		case <-t.C:
			read()
		}
	}
}
