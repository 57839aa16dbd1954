package main

import (
	"strings"
	"testing"
)

// Several keys in one run are taken all or none, and CMD learns every
// key and fence.
func TestRunSeveralKeys(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	r := cli(t, env, "run", key+"/b", key+"/a", "--", "sh", "-c", `echo "$LOCKER_KEY"; echo "$LOCKER_KEYS"; echo "$LOCKER_FENCES"`).want(t, 0, "run of two keys")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 || lines[0] != key+"/b" || lines[1] != key+"/b" || lines[2] != key+"/a" || lines[3] == "" || lines[4] == "" {
		t.Errorf("CMD saw LOCKER_KEY, LOCKER_KEYS and LOCKER_FENCES = %q; want the first key, both keys and both fences, in order", lines)
	}
	h := holder(t, env, key+"/a")
	r = cli(t, env, "run", "--try", key+"/b", key+"/a", "--", "echo", "ran").want(t, exitTempFail, "--try of two keys, one held")
	if r.stdout != "" || !strings.Contains(r.stderr, "one or more are held") {
		t.Errorf("--try of two keys, one held: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	cli(t, env, "status", key+"/b").want(t, exitFail, "status of the key a refused run did not keep")
	h.stdin.Close()
	h.exit(t)
	cli(t, env, "run", key+"/a", key+"/a", "--", "true").want(t, exitUsage, "run of a key given twice")
}

// Shared runs share a key and keep a writer out; status and list show
// every holder.
func TestRunShared(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := uniqueKey(t)
	r1 := holder(t, env, key, "--shared")
	r2 := holder(t, env, key, "--shared")
	r := cli(t, env, "run", "--try", key, "--", "true").want(t, exitTempFail, "an exclusive run beside shared ones")
	if !strings.Contains(r.stderr, "shared by owner") || !strings.Contains(r.stderr, "and 1 more") {
		t.Errorf("refused exclusive run: stderr %q; want the shared holders named", r.stderr)
	}
	r = cli(t, env, "status", key).want(t, 0, "status of a shared key")
	if strings.Count(r.stdout, "shared") != 2 {
		t.Errorf("status of a key held shared twice printed %q; want a row per holder", r.stdout)
	}
	r1.stdin.Close()
	r2.stdin.Close()
	r1.exit(t)
	r2.exit(t)
	cli(t, env, "run", "--try", key, "--", "true").want(t, 0, "an exclusive run once the readers left")
}

// A subtree run covers the paths below its path, not the plain key of
// that name nor a sibling sharing a prefix; it is shown, and forced, by
// --subtree.
func TestRunSubtree(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	key := strings.ReplaceAll(uniqueKey(t), "/", ":")
	h := holder(t, env, key+"/a", "--subtree", "--ttl", "3s")
	cli(t, env, "run", "--try", "--subtree", key+"/a/b", "--", "true").want(t, exitTempFail, "a path below a held subtree")
	cli(t, env, "run", "--try", "--subtree", key+"/ab", "--", "true").want(t, 0, "a sibling path sharing a prefix")
	cli(t, env, "run", "--try", key+"/a", "--", "true").want(t, 0, "the plain key of the same name")
	cli(t, env, "run", "--subtree", key+"//a", "--", "true").want(t, exitUsage, "a path with an empty segment")
	r := cli(t, env, "status", "--subtree", key+"/a").want(t, 0, "status of a subtree lock")
	if !strings.Contains(r.stdout, "subtree exclusive") {
		t.Errorf("status --subtree printed %q", r.stdout)
	}
	cli(t, env, "status", key+"/a").want(t, exitFail, "status of the plain key of that name")
	r = cli(t, env, "list", key).want(t, 0, "list")
	if !strings.Contains(r.stdout, "subtree exclusive") {
		t.Errorf("list printed %q; want the subtree lock", r.stdout)
	}
	cli(t, env, "unlock", "--force", "--subtree", key+"/a").want(t, 0, "unlock --force --subtree")
	if code := h.exit(t); code != exitLeaseLost {
		t.Errorf("force-unlocked subtree holder: exit %d, want %d", code, exitLeaseLost)
	}
}
