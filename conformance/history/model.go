package history

import (
	"fmt"

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

// input is one operation's call: which key and lease (leases are numbered
// per history; 0 for a failed acquire).
type input struct {
	kind  kind
	key   string
	lease int
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

// state is one key's: its holding lease (0: none), the last fence granted,
// and whether the key may be held unseen since the last grant: by a failed
// acquire (a grant whose reply was lost lasts until it is undone or lapses)
// or by a lease that ended by itself (its Deadline is the holder's
// conservative bound: the backend may keep the key a little longer, as
// Redlock's masters do for the clock-drift margin).
type state struct {
	holder int
	fence  uint64
	ghost  bool
}

// model is a fenced lease on each key: an acquire succeeds only on a free
// key, with a fence above every earlier one; a refusal only while someone
// (maybe a failed acquire's lost grant) holds it; only the holder's Unlock
// or Refresh succeeds (ErrNotHeld says its lease had ended); a lease that
// ends by itself lets the key go at some moment after its end began (its
// Deadline, or the failed Unlock's call), never before, and may leave it
// refused until the next grant. So a grant to
// another while a holder still had its lease, by its Deadline and its Done,
// has no place in any order. Histories are partitioned by key.
var model = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(input).key
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() any { return state{} },
	Step: func(st, in, out any) (bool, any) {
		return step(st.(state), in.(input), out.(output))
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		s := fmt.Sprintf("%s lease %d → %s", kindNames[i.kind], i.lease, resultNames[o.result])
		if i.kind == acquire && o.result == ok {
			s += fmt.Sprintf(", fence %d", o.fence)
		}
		return s
	},
	DescribeState: func(st any) string {
		s := st.(state)
		if s.holder == 0 {
			return fmt.Sprintf("free (last fence %d, lost grant possible: %v)", s.fence, s.ghost)
		}
		return fmt.Sprintf("held by lease %d, fence %d", s.holder, s.fence)
	},
}

func step(s state, in input, out output) (bool, state) {
	mine := s.holder == in.lease && in.lease != 0
	switch in.kind {
	case acquire:
		switch out.result {
		case ok:
			return s.holder == 0 && out.fence > s.fence, state{holder: in.lease, fence: out.fence}
		case refused:
			return s.holder != 0 || s.ghost, s
		}
		return true, s
	case failed:
		s.ghost = true
		return true, s
	case release, refresh:
		switch out.result {
		case ok:
			if in.kind == release {
				return mine, state{fence: s.fence, ghost: s.ghost}
			}
			return mine, s
		case notHeld: // the lease had ended: no later than this
			if mine {
				return true, state{fence: s.fence, ghost: true}
			}
		}
		return true, s
	case end:
		if mine {
			return true, state{fence: s.fence, ghost: true}
		}
	}
	return true, s
}
