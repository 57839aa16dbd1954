package history

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// kind is what an operation did.
type kind uint8

const (
	acquire kind = iota // Lock or TryLock
	release             // Unlock
	refresh             // Refresh
	end                 // the lease ended by itself (expired, lost) or was let go in the background
	failed              // a Lock or TryLock that failed: no effect the history can see
)

var kindNames = [...]string{"acquire", "unlock", "refresh", "end", "failed acquire"}

// input is one operation's call: which key, in which mode and space, and
// which lease (leases are numbered per history; 0 for a failed acquire).
type input struct {
	kind    kind
	key     string
	shared  bool
	subtree bool
	lease   int
}

// partition names the locks an operation may meet: its plain key, or the
// top segment of its subtree path (paths below different ones never
// overlap).
func (in input) partition() string {
	if in.subtree {
		top, _, _ := strings.Cut(in.key, "/")
		return "subtree:" + top
	}
	return "key:" + in.key
}

func (in input) mode() string {
	if in.shared {
		return "S"
	}
	return "X"
}

// result is an operation's outcome as the model sees it.
type result uint8

const (
	ok      result = iota
	refused        // ErrLocked
	notHeld        // ErrNotHeld
	other          // any other error: the outcome is unknown
)

var resultNames = [...]string{"ok", "ErrLocked", "ErrNotHeld", "error"}

type output struct {
	result result
	fence  uint64 // an acquire's grant
}

// state is one partition's: its holding leases, the highest fences granted
// on each of its keys (in any mode, and exclusive), and whether a key may
// be held unseen since: by a failed acquire (a grant whose reply was lost
// lasts until it is undone or lapses) or by a lease that ended by itself
// (its Deadline is the holder's conservative bound: the backend may keep
// the key a little longer, as Redlock's masters do for the clock-drift
// margin). Holders and fences are kept as sorted text, so states compare
// with ==.
type state struct {
	holders string // "lease mode key" records, by lease, NUL-separated (keys hold no NUL)
	fences  string // "all exclusive key" records, by key
	ghost   bool
}

type holding struct {
	lease  int
	shared bool
	key    string
}

type keyFences struct {
	key       string
	all, excl uint64
}

// model is a fenced lease on each key, or subtree path: an acquire
// succeeds only if no holder conflicts (an exclusive lease conflicts with
// every other, a shared one with exclusive ones; subtree paths meet where
// one equals or lies below the other), with a fence above that of every
// earlier grant of its key and of every conflicting grant of a path it
// meets; a refusal only while someone (maybe a failed acquire's lost
// grant) holds what conflicts; only the holder's Unlock or Refresh
// succeeds (ErrNotHeld says its lease had ended); a lease that ends by
// itself lets go at some moment after its end began (its Deadline, or the
// failed Unlock's call), never before. So a conflicting grant while a
// holder still had its lease, by its Deadline and its Done, has no place in
// any order. Histories are partitioned by key, and subtree paths by their
// top segment.
var model = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byPart := map[string][]porcupine.Operation{}
		var parts []string
		for _, op := range h {
			p := op.Input.(input).partition()
			if _, seen := byPart[p]; !seen {
				parts = append(parts, p)
			}
			byPart[p] = append(byPart[p], op)
		}
		out := make([][]porcupine.Operation, 0, len(parts))
		for _, p := range parts {
			out = append(out, byPart[p])
		}
		return out
	},
	Init: func() any { return state{} },
	Step: func(st, in, out any) (bool, any) {
		return step(st.(state), in.(input), out.(output))
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		s := fmt.Sprintf("%s lease %d → %s", kindNames[i.kind], i.lease, resultNames[o.result])
		if i.kind == acquire {
			s = fmt.Sprintf("%s %s %q: %s", kindNames[i.kind], i.mode(), i.key, s[len(kindNames[i.kind])+1:])
		}
		if i.kind == acquire && o.result == ok {
			s += fmt.Sprintf(", fence %d", o.fence)
		}
		return s
	},
	DescribeState: func(st any) string {
		s := st.(state)
		held := strings.ReplaceAll(s.holders, sep, "; ")
		if held == "" {
			held = "free"
		}
		return fmt.Sprintf("%s (fences: %s; lost grant possible: %v)", held, strings.ReplaceAll(s.fences, sep, "; "), s.ghost)
	},
}

func step(s state, in input, out output) (bool, state) {
	holders := decodeHolders(s.holders)
	mine := slices.IndexFunc(holders, func(h holding) bool { return h.lease == in.lease && in.lease != 0 })
	switch in.kind {
	case acquire:
		switch out.result {
		case ok:
			return grant(s, holders, in, out.fence)
		case refused:
			return s.ghost || slices.ContainsFunc(holders, func(h holding) bool { return conflict(in, h) }), s
		}
		return true, s
	case failed:
		s.ghost = true
		return true, s
	case release, refresh:
		switch out.result {
		case ok:
			if in.kind == release && mine >= 0 {
				s.holders = encodeHolders(slices.Delete(holders, mine, mine+1))
			}
			return mine >= 0, s
		case notHeld: // the lease had ended: no later than this
			if mine >= 0 {
				s.holders, s.ghost = encodeHolders(slices.Delete(holders, mine, mine+1)), true
			}
		}
		return true, s
	case end:
		if mine >= 0 {
			s.holders, s.ghost = encodeHolders(slices.Delete(holders, mine, mine+1)), true
		}
	}
	return true, s
}

// grant steps an acquire that succeeded with fence.
func grant(s state, holders []holding, in input, fence uint64) (bool, state) {
	if slices.ContainsFunc(holders, func(h holding) bool { return conflict(in, h) }) {
		return false, s
	}
	fences := decodeFences(s.fences)
	i := slices.IndexFunc(fences, func(f keyFences) bool { return f.key == in.key })
	for _, f := range fences {
		switch {
		case f.key == in.key && fence <= f.all:
			return false, s
		case f.key != in.key && in.subtree && overlap(in.key, f.key) && (fence <= f.excl || !in.shared && fence <= f.all):
			return false, s
		}
	}
	if i < 0 {
		fences = append(fences, keyFences{key: in.key})
		i = len(fences) - 1
	}
	fences[i].all = max(fences[i].all, fence)
	if !in.shared {
		fences[i].excl = max(fences[i].excl, fence)
		// Nothing that conflicts can be held, unseen or not.
		s.ghost = s.ghost && in.subtree && strings.Contains(in.key, "/")
	}
	holders = append(holders, holding{lease: in.lease, shared: in.shared, key: in.key})
	s.holders, s.fences = encodeHolders(holders), encodeFences(fences)
	return true, s
}

// conflict reports whether the acquire in conflicts with holder h.
func conflict(in input, h holding) bool {
	meet := h.key == in.key || in.subtree && overlap(in.key, h.key)
	return meet && (!in.shared || !h.shared)
}

// overlap reports whether one subtree path equals or lies below the other.
func overlap(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// sep separates the records of a state's text.
const sep = "\x00"

func encodeHolders(hs []holding) string {
	slices.SortFunc(hs, func(a, b holding) int { return a.lease - b.lease })
	lines := make([]string, len(hs))
	for i, h := range hs {
		m := "X"
		if h.shared {
			m = "S"
		}
		lines[i] = fmt.Sprintf("%d %s %s", h.lease, m, h.key)
	}
	return strings.Join(lines, sep)
}

func decodeHolders(s string) []holding {
	if s == "" {
		return nil
	}
	var hs []holding
	for line := range strings.SplitSeq(s, sep) {
		lease, rest, _ := strings.Cut(line, " ")
		m, key, _ := strings.Cut(rest, " ")
		n, _ := strconv.Atoi(lease)
		hs = append(hs, holding{lease: n, shared: m == "S", key: key})
	}
	return hs
}

func encodeFences(fs []keyFences) string {
	slices.SortFunc(fs, func(a, b keyFences) int { return strings.Compare(a.key, b.key) })
	lines := make([]string, len(fs))
	for i, f := range fs {
		lines[i] = fmt.Sprintf("%d %d %s", f.all, f.excl, f.key)
	}
	return strings.Join(lines, sep)
}

func decodeFences(s string) []keyFences {
	if s == "" {
		return nil
	}
	var fs []keyFences
	for line := range strings.SplitSeq(s, sep) {
		all, rest, _ := strings.Cut(line, " ")
		excl, key, _ := strings.Cut(rest, " ")
		a, _ := strconv.ParseUint(all, 10, 64)
		x, _ := strconv.ParseUint(excl, 10, 64)
		fs = append(fs, keyFences{key: key, all: a, excl: x})
	}
	return fs
}
