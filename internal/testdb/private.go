package testdb

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A Server is a database server of one test's own, in a temporary
// directory on a free port: the test may stop and start it without
// disturbing any other test or the machine's own servers. It is stopped
// and its directory removed when the test ends.
type Server struct {
	// DSN reaches the server: for PostgreSQL a URL of its database
	// "postgres", for MariaDB a go-sql-driver DSN with no database.
	DSN  string
	Port int

	name  string
	stop  func() error
	start func() error
	mu    sync.Mutex
	up    bool
}

// Stop stops the server the way a crash would where it can (PostgreSQL:
// immediate shutdown, no checkpoint; MariaDB: SIGTERM, the sessions cut)
// and returns once it is gone.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.up {
		return nil
	}
	if err := s.stop(); err != nil {
		return fmt.Errorf("stop the private %s: %w", s.name, err)
	}
	s.up = false
	return nil
}

// Start starts the server again and returns once it accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up {
		return nil
	}
	if err := s.start(); err != nil {
		return fmt.Errorf("start the private %s: %w", s.name, err)
	}
	s.up = true
	return nil
}

// run starts s for the test and stops it when the test ends.
func (s *Server) run(t testing.TB) {
	t.Helper()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
}

// The programs a private server needs, looked up once.
var (
	PrivatePostgresService = &Service{Name: "a private PostgreSQL (initdb, pg_ctl)", Env: "PATH", probe: func() error {
		if postgresBin("initdb") == "" || postgresBin("pg_ctl") == "" {
			return errors.New("initdb and pg_ctl are not installed (PATH, /usr/lib/postgresql/*/bin)")
		}
		return nil
	}}
	PrivateMariaDBService = &Service{Name: "a private MariaDB (mariadb-install-db, mariadbd)", Env: "PATH", probe: func() error {
		for _, p := range []string{"mariadb-install-db", mariadbdPath()} {
			if _, err := exec.LookPath(p); err != nil {
				return err
			}
		}
		return nil
	}}
)

// postgresBin finds a PostgreSQL program: on PATH, else in Debian's
// /usr/lib/postgresql/<version>/bin.
func postgresBin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(ms) == 0 {
		return ""
	}
	return ms[len(ms)-1]
}

// mariadbdPath is the MariaDB server binary: mariadbd on PATH, else
// Debian's /usr/sbin/mariadbd.
func mariadbdPath() string {
	if p, err := exec.LookPath("mariadbd"); err == nil {
		return p
	}
	return "/usr/sbin/mariadbd"
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ownedDir makes a temporary directory owned by the system user name
// when the test runs as root (database servers refuse to run as root),
// and removes it when the test ends. It returns the directory and the
// user's ids (-1 when not root).
func ownedDir(t testing.TB, pattern, name string) (dir string, uid, gid int) {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() != 0 {
		return dir, -1, -1
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("running as root, the server needs the system user %s: %v", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir, uid, gid
}

// waitDial polls addr until it accepts a connection.
func waitDial(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := dial(addr)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PrivatePostgres starts a PostgreSQL server of the test's own (initdb into
// a temporary directory, trust authentication, fsync off: a stop loses
// nothing the server acknowledged, since the operating system keeps what
// it was given). It skips the test when PostgreSQL's programs are not
// installed (fails it under CI=true).
func PrivatePostgres(t testing.TB) *Server {
	t.Helper()
	Require(t, PrivatePostgresService)
	initdb, pgCtl := postgresBin("initdb"), postgresBin("pg_ctl")
	dir, uid, _ := ownedDir(t, "keel-pg-", "postgres")
	var asUser []string
	if uid >= 0 {
		asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(args ...string) error {
		args = append(append([]string{}, asUser...), args...)
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := run(initdb, "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "--no-instructions"); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", port, dir)
	s := &Server{
		name: "PostgreSQL",
		Port: port,
		DSN:  fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", port),
		start: func() error {
			return run(pgCtl, "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start")
		},
		stop: func() error { return run(pgCtl, "-D", data, "-m", "immediate", "-w", "stop") },
	}
	s.run(t)
	return s
}

// PrivateMariaDB starts a MariaDB server of the test's own
// (mariadb-install-db into a temporary directory, its own socket and port,
// root without a password). It skips the test when MariaDB's programs are
// not installed (fails it under CI=true).
func PrivateMariaDB(t testing.TB) *Server {
	t.Helper()
	Require(t, PrivateMariaDBService)
	// Its own directory is also its temporary one: $TMPDIR may not be
	// writable by the mysql user.
	dir, uid, _ := ownedDir(t, "keel-mariadb-", "mysql")
	data := filepath.Join(dir, "data")
	userFlag := []string{}
	if uid >= 0 {
		userFlag = []string{"--user=mysql"}
	}
	install := exec.Command("mariadb-install-db", append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--innodb-buffer-pool-size=64M",
		"--tmpdir=" + dir}, userFlag...)...)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := freePort(t)
	args := append([]string{"--no-defaults", "--datadir=" + data, "--socket=" + filepath.Join(dir, "sock"),
		fmt.Sprintf("--port=%d", port), "--bind-address=127.0.0.1", "--pid-file=" + filepath.Join(dir, "pid"),
		"--log-error=" + filepath.Join(dir, "error.log"), "--innodb-buffer-pool-size=64M", "--skip-log-bin",
		"--max-connections=300", "--tmpdir=" + dir}, userFlag...)
	var proc *exec.Cmd
	var exited chan struct{}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &Server{
		name: "MariaDB",
		Port: port,
		DSN:  fmt.Sprintf("root@tcp(%s)/?timeout=5s", addr),
		start: func() error {
			proc = exec.Command(mariadbdPath(), args...)
			if err := proc.Start(); err != nil {
				return err
			}
			exited = make(chan struct{})
			go func(p *exec.Cmd, done chan struct{}) { p.Wait(); close(done) }(proc, exited) //nolint:errcheck // its exit is seen through done
			if err := waitDial(addr, 60*time.Second); err != nil {
				proc.Process.Kill() //nolint:errcheck // it did not come up
				<-exited
				log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
				return fmt.Errorf("not accepting connections 60s after start: %v\n%s", err, log)
			}
			return nil
		},
		stop: func() error {
			if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
				return err
			}
			select {
			case <-exited:
				return nil
			case <-time.After(60 * time.Second):
				proc.Process.Kill() //nolint:errcheck // it would not stop
				<-exited
				return errors.New("still running 60s after SIGTERM: killed")
			}
		},
	}
	s.run(t)
	return s
}
