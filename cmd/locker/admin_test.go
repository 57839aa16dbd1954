package main

import (
	"strconv"
	"strings"
	"testing"
)

func TestStatusListUnlockForce(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	h := holder(t, env, key+"/a", "--ttl", "3s") // short, to notice the loss sooner; not 1 s, a thin renewal margin beside race-built CLI runs on 2 cores
	h2 := holder(t, env, key+"/b")

	r := cli(t, env, "status", key+"/a").want(t, 0, "status of a held key")
	if !strings.Contains(r.stdout, strconv.Quote(key+"/a")) || !strings.Contains(r.stdout, "FENCE") {
		t.Errorf("status printed %q", r.stdout)
	}
	r = cli(t, env, "list", key+"/").want(t, 0, "list")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 3 ||
		!strings.Contains(lines[1], key+"/a") || !strings.Contains(lines[2], key+"/b") {
		t.Errorf("list printed %q; want a header and the two keys in order", r.stdout)
	}
	cli(t, env, "unlock", key+"/a").want(t, exitUsage, "unlock without --force")
	cli(t, env, "unlock", "--force", key+"/a").want(t, 0, "unlock --force")
	if code := h.exit(t); code != exitLeaseLost {
		t.Errorf("force-unlocked holder: exit %d, want %d", code, exitLeaseLost)
	}
	cli(t, env, "unlock", "--force", key+"/a").want(t, exitFail, "unlock --force of a free key")
	r = cli(t, env, "status", key+"/a").want(t, exitFail, "status of a free key")
	if !strings.Contains(r.stdout, "free") {
		t.Errorf("status of a free key printed %q", r.stdout)
	}
	r = cli(t, env, "list", key+"/").want(t, 0, "list")
	if strings.Contains(r.stdout, key+"/a") || !strings.Contains(r.stdout, key+"/b") {
		t.Errorf("list after unlock --force printed %q", r.stdout)
	}
	h2.stdin.Close()
	h2.exit(t)
}
