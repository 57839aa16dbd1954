package main

import (
	"fmt"
	"os"
	"os/user"
	"strings"
	"unicode/utf8"

	"github.com/locker-go/locker"
)

// defaultLabel is what locker run records about its holder unless told
// otherwise (--label): "user@host pid N: CMD", so that `locker status`
// answers who holds the key, where and doing what. Control characters
// become spaces; it is cut to locker.MaxLabelLen.
func defaultLabel(cmd []string) string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	l := fmt.Sprintf("%s@%s pid %d: %s", name, host, os.Getpid(), strings.Join(cmd, " "))
	l = strings.Map(func(r rune) rune {
		if r < ' ' || r == utf8.RuneError {
			return ' '
		}
		return r
	}, l)
	for len(l) > locker.MaxLabelLen {
		_, size := utf8.DecodeLastRuneInString(l)
		l = l[:len(l)-size]
	}
	return l
}
