package locker

import (
	"fmt"
	"strings"
)

// MaxLabelLen is the longest label WithLabel takes, in bytes.
const MaxLabelLen = 256

// labelSep joins an owner and its label into the owner token a backend
// records: every backend keeps an owner with each holder and gives it back
// to Status and List, so a label needs nothing of the drivers. Owners and
// labels may not contain it.
const labelSep = "\x1f" // ASCII unit separator

// WithLabel records a human-readable description of the holder with the
// lock (who, where, doing what: "alice@build-3 pid 4121: make release"),
// which Admin's Status and List return in LockInfo.Label and each
// Holder's Label. It is at most MaxLabelLen bytes of UTF-8 without NUL or
// U+001F, and owner and label together at most MaxKeyLen bytes, else the
// call fails with ErrInvalidOwner, changing nothing. An owner's label is
// part of its identity in the backend: re-entry (WithOwner) finds the
// owner's holds only when given the same label.
func WithLabel(label string) Option { return func(o *Options) { o.Label = label } }

// checkLabel checks o's label, and its owner against the separator.
func checkLabel(o Options) error {
	if strings.Contains(o.Owner, labelSep) {
		return fmt.Errorf("%w: holds U+001F, which separates a label", ErrInvalidOwner)
	}
	if o.Label == "" {
		return nil
	}
	if err := checkString(o.Label); err != nil || len(o.Label) > MaxLabelLen || strings.Contains(o.Label, labelSep) {
		return fmt.Errorf("%w: label %q: at most %d bytes of UTF-8, no NUL or U+001F", ErrInvalidOwner, o.Label, MaxLabelLen)
	}
	if n := len(o.Owner) + len(labelSep) + len(o.Label); n > MaxKeyLen {
		return fmt.Errorf("%w: owner and label together are %d bytes, over %d", ErrInvalidOwner, n, MaxKeyLen)
	}
	return nil
}

// storedOwner is the owner token of o as the backend records it: the
// owner, and its label if any.
func storedOwner(o Options) string {
	if o.Label == "" {
		return o.Owner
	}
	return o.Owner + labelSep + o.Label
}

// splitOwner splits a recorded owner token into owner and label.
func splitOwner(stored string) (owner, label string) {
	owner, label, _ = strings.Cut(stored, labelSep)
	return owner, label
}

// ownerOf is the owner of a recorded owner token, without its label.
func ownerOf(stored string) string {
	owner, _ := splitOwner(stored)
	return owner
}
