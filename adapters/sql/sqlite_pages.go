package sql

import (
	"sync"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
)

// The pure-Go SQLite (modernc.org/sqlite, through glebarez/go-sqlite)
// allocates from modernc.org/memory, which maps a 1 MiB page for each
// size class of its slots and unmaps it as soon as its last slot is freed:
// a statement that allocates and frees a class nobody else holds maps,
// faults in and unmaps a page every time it runs (the modal transaction's
// reads spent 40% of their time in mmap and munmap). keepPages holds one
// slot of every class for the life of the process, so that each class
// keeps its first page: a few bytes of each touched, nothing else.
var keepPages = sync.OnceFunc(func() {
	tls := libc.NewTLS()
	defer tls.Close()
	for log := 4; log <= 18; log++ { // mallocAllign 16 to maxSlotSize (1 MiB / 4)
		libc.Xmalloc(tls, types.Size_t(1)<<log)
	}
})
