package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// Postgres is a PostgreSQL cluster of its own (initdb in Dir/data) on a
// loopback port, run without fsync (a SIGKILL loses nothing the kernel was
// given) and without waiting for the log at commit (synchronous_commit=off:
// a SIGKILL does lose the last commits; a server that is killed on purpose
// sets it on through Extra).
type Postgres struct {
	Dir      string // data/ goes here; the postgres OS user must reach it when we are root
	Port     int
	SockDir  string   // its Unix socket's directory; "" for none
	HostAuth string   // how TCP logins authenticate: "trust", "scram-sha-256"
	Extra    []string // more settings ("-c", "name=value"), after ours: a later one wins
}

// PostgresBin is the directory of initdb and postgres: PG_BIN, else the
// newest packaged major version's.
func PostgresBin() (string, error) {
	if d := os.Getenv("PG_BIN"); d != "" {
		return d, nil
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	major := func(initdb string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
		return n
	}
	slices.SortFunc(bins, func(a, b string) int { return major(a) - major(b) })
	if len(bins) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", errors.New("PostgreSQL's server programs not found under /usr/lib/postgresql (Debian package postgresql, or set PG_BIN)")
	}
	return filepath.Dir(bins[len(bins)-1]), nil
}

// PostgresCredential is the postgres OS user's when we are root (postgres
// refuses to run as root), else nil: we run it as ourselves.
func PostgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("no postgres OS user (Debian package postgresql): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Data is the cluster's data directory.
func (p Postgres) Data() string { return filepath.Join(p.Dir, "data") }

// Init makes Dir (and SockDir) the postgres user's and runs initdb there,
// unless a cluster is there already.
func (p Postgres) Init() error {
	cred, err := PostgresCredential()
	if err != nil {
		return err
	}
	for _, d := range []string{p.Dir, p.SockDir} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return err
			}
		}
	}
	if _, err := os.Stat(filepath.Join(p.Data(), "PG_VERSION")); err == nil {
		return nil
	}
	if err := os.RemoveAll(p.Data()); err != nil {
		return err
	}
	cmd, err := p.command("initdb", "-D", p.Data(), "-U", "postgres", "-N", "--auth-local=trust",
		"--auth-host="+p.HostAuth, "--encoding=UTF8", "--locale=C")
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// Cmd is the command that runs the postmaster in the foreground. Its
// settings are on the command line, so they override any file's.
func (p Postgres) Cmd() (*exec.Cmd, error) {
	return p.command("postgres", append([]string{"-D", p.Data(), "-c", "listen_addresses=127.0.0.1", "-c", "port=" + strconv.Itoa(p.Port),
		"-c", "unix_socket_directories=" + p.SockDir, "-c", "max_connections=300", "-c", "fsync=off",
		"-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "password_encryption=scram-sha-256"}, p.Extra...)...)
}

func (p Postgres) command(name string, args ...string) (*exec.Cmd, error) {
	bin, err := PostgresBin()
	if err != nil {
		return nil, err
	}
	cred, err := PostgresCredential()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Dir = "/" // the postgres user may not reach ours
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return cmd, nil
}

// PostgresAnswers is a Check that url logs in.
func PostgresAnswers(url string) Check {
	return func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		return c.Ping(ctx)
	}
}

// SocketDSN logs in as the superuser through the Unix socket (trust).
func (p Postgres) SocketDSN() string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", p.SockDir, p.Port)
}

// Bootstrap makes (or mends) the login role name with password and its
// database name, as the superuser through the Unix socket.
func (p Postgres) Bootstrap(ctx context.Context, name, password string) error {
	c, err := pgx.Connect(ctx, p.SocketDSN())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	var exists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	verb := "CREATE"
	if exists {
		verb = "ALTER"
	}
	// Utility statements take no parameters: the password is quoted here.
	if _, err := c.Exec(ctx, fmt.Sprintf("%s ROLE %s LOGIN PASSWORD '%s'", verb, ident, strings.ReplaceAll(password, "'", "''"))); err != nil {
		return err
	}
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil || exists {
		return err
	}
	_, err = c.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", ident, ident))
	return err
}
