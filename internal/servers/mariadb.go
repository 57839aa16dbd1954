package servers

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
)

// MariaDB is a mariadbd of its own (mariadb-install-db in Dir/data) on a
// loopback port, reached by its socket in Dir and over TCP.
type MariaDB struct {
	Dir   string
	Port  int
	Extra []string // more settings, e.g. --skip-grant-tables
}

// mariadbUser is the OS user mariadbd runs as: ours. (mariadbd runs as root
// only when told so by --user=root.)
func mariadbUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return strconv.Itoa(os.Geteuid())
}

// Data is the server's data directory.
func (m MariaDB) Data() string { return filepath.Join(m.Dir, "data") }

// Socket is the server's Unix socket, where the OS user root logs in as root.
func (m MariaDB) Socket() string { return filepath.Join(m.Dir, "mysqld.sock") }

// Init runs mariadb-install-db, unless a server's data is there already.
func (m MariaDB) Init() error {
	if _, err := os.Stat(filepath.Join(m.Data(), "mysql")); err == nil {
		return nil
	}
	bin, err := look("mariadb-install-db", "mariadb-server")
	if err != nil {
		return err
	}
	if err := os.RemoveAll(m.Data()); err != nil {
		return err
	}
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return err
	}
	out, err := exec.Command(bin, "--no-defaults", "--datadir="+m.Data(), "--user="+mariadbUser(),
		"--auth-root-authentication-method=socket", "--skip-test-db").CombinedOutput()
	if err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	return nil
}

// Cmd is the command that runs the server in the foreground, its errors
// logged to Dir/mariadb.log.
func (m MariaDB) Cmd() (*exec.Cmd, error) {
	bin, err := look("mariadbd", "mariadb-server")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"--no-defaults", "--datadir=" + m.Data(), "--user=" + mariadbUser(),
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(m.Port), "--socket=" + m.Socket(),
		"--pid-file=" + filepath.Join(m.Data(), "mariadbd.pid"), "--skip-name-resolve", "--skip-log-bin",
		"--max-connections=1000", "--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0",
		"--innodb-buffer-pool-size=128M", "--log-error=" + m.Log()}, m.Extra...)...)
	cmd.Dir = m.Dir
	return cmd, nil
}

// Log is the server's error log.
func (m MariaDB) Log() string { return filepath.Join(m.Dir, "mariadb.log") }

// MariaDBAnswers is a Check that dsn (go-sql-driver's form) logs in and
// runs a query.
func MariaDBAnswers(dsn string) Check {
	return func(ctx context.Context) error {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		var one int
		return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}
}

// Bootstrap runs statements as root through the server's socket (the
// mariadb client: root logs in there by being the OS user root).
func (m MariaDB) Bootstrap(ctx context.Context, statements ...string) error {
	bin, err := look("mariadb", "mariadb-client")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, "--no-defaults", "--socket="+m.Socket(), "-u", "root")
	cmd.Stdin = strings.NewReader(strings.Join(statements, ";\n") + ";\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb as root: %w\n%s", err, out)
	}
	return nil
}
