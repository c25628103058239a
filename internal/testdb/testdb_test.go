package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPostgresSchema: the schema exists during the test, two calls give two
// schemas, and both are gone once the test has ended.
func TestPostgresSchema(t *testing.T) {
	t.Parallel()
	Require(t, Postgres)
	var names []string
	t.Run("inner", func(t *testing.T) {
		names = []string{PostgresSchema(t, "keel_testdb"), PostgresSchema(t, "keel_testdb")}
		if names[0] == names[1] {
			t.Fatalf("two calls gave the same schema %s", names[0])
		}
		for _, n := range names {
			if !pgSchemaExists(t, n) {
				t.Fatalf("schema %s does not exist during the test", n)
			}
		}
	})
	for _, n := range names {
		if pgSchemaExists(t, n) {
			t.Errorf("schema %s still exists after the test", n)
		}
	}
}

func pgSchemaExists(t *testing.T, name string) bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestMySQLDatabase: the database exists during the test and its DSN opens
// it; it is gone once the test has ended.
func TestMySQLDatabase(t *testing.T) {
	t.Parallel()
	Require(t, MySQL)
	var name string
	t.Run("inner", func(t *testing.T) {
		var dsn string
		name, dsn = MySQLDatabase(t, "keel_testdb")
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var current string
		if err := db.QueryRow(`SELECT DATABASE()`).Scan(&current); err != nil || current != name {
			t.Fatalf("the DSN opens database %q (%v), want %s", current, err, name)
		}
		if u := MySQLURL(t, dsn); !strings.HasPrefix(u, "mysql://") || !strings.HasSuffix(u, "/"+name) {
			t.Fatalf("MySQLURL = %s, want mysql://…/%s", u, name)
		}
	})
	db, err := sql.Open("mysql", MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s still exists after the test", name)
	}
}

// TestSQLiteFile: every call gives a new path.
func TestSQLiteFile(t *testing.T) {
	a, b := SQLiteFile(t), SQLiteFile(t)
	if a == b {
		t.Fatalf("two calls gave the same file %s", a)
	}
	if _, err := os.Stat(a); !os.IsNotExist(err) {
		t.Fatalf("%s exists before the test creates it: %v", a, err)
	}
}

// TestOnlyTestsImportIt: no package's non-test code imports testdb, but
// the test helper packages (internal/brokertest and the like).
func TestOnlyTestsImportIt(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "github.com/keelq/keel/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const self = "github.com/keelq/keel/internal/testdb"
	for _, line := range strings.Split(string(out), "\n") {
		pkg, imports, _ := strings.Cut(line, ": ")
		if strings.Contains(pkg, "/internal/") && strings.HasSuffix(pkg, "test") {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if imp == self {
				t.Errorf("%s imports %s outside its tests", pkg, self)
			}
		}
	}
}

// TestPrivateServers: a private PostgreSQL and a private MariaDB answer,
// refuse connections once stopped, and answer again after a start with
// what was written before the stop.
func TestPrivateServers(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		s := PrivatePostgres(t)
		query := func() error {
			conn, err := pgx.Connect(context.Background(), s.DSN)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(context.Background(), `CREATE TABLE IF NOT EXISTS kept (n int); INSERT INTO kept VALUES (1)`)
			return err
		}
		restartKeeps(t, s, query, func() (int, error) {
			conn, err := pgx.Connect(context.Background(), s.DSN)
			if err != nil {
				return 0, err
			}
			defer conn.Close(context.Background())
			var n int
			return n, conn.QueryRow(context.Background(), `SELECT count(*) FROM kept`).Scan(&n)
		})
	})
	t.Run("mariadb", func(t *testing.T) {
		t.Parallel()
		s := PrivateMariaDB(t)
		db, err := sql.Open("mysql", s.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		restartKeeps(t, s, func() error {
			_, err := db.Exec(`CREATE DATABASE IF NOT EXISTS k`)
			if err == nil {
				_, err = db.Exec(`CREATE TABLE IF NOT EXISTS k.kept (n int) ENGINE = InnoDB`)
			}
			if err == nil {
				_, err = db.Exec(`INSERT INTO k.kept VALUES (1)`)
			}
			return err
		}, func() (int, error) {
			var n int
			return n, db.QueryRow(`SELECT count(*) FROM k.kept`).Scan(&n)
		})
	})
}

// restartKeeps writes once, stops s, checks a write fails, starts s and
// checks the first write is there.
func restartKeeps(t *testing.T, s *Server, write func() error, count func() (int, error)) {
	t.Helper()
	if err := write(); err != nil {
		t.Fatalf("write to the running server: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := write(); err == nil {
		t.Fatal("a write succeeded while the server was stopped")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if n, err := count(); err != nil || n != 1 {
		t.Fatalf("after the restart: %d rows (%v), want the 1 written before", n, err)
	}
}

// fakeTB records what Require asks of a test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Skip(args ...any)          { f.skipped = fmt.Sprint(args...) }
func (f *fakeTB) Fatalf(s string, a ...any) { f.failed = fmt.Sprintf(s, a...) }

// TestRequire: a service that answers lets the test run; one that does not
// skips it with a line naming the service, the reason and the variable to
// set, except under CI=true, where it fails the test.
func TestRequire(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	up := &Service{Name: "Up", Env: "KEEL_TEST_UP", probe: func() error { return dial(addr) }}
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l2.Addr().String()
	l2.Close()
	down := &Service{Name: "Down", Env: "KEEL_TEST_DOWN", probe: func() error { return dial(closed) }}
	defer l.Close()
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		f := &fakeTB{}
		Require(f, up)
		if f.skipped != "" || f.failed != "" {
			t.Errorf("CI=%q, service up: skipped %q, failed %q", ci, f.skipped, f.failed)
		}
		f = &fakeTB{}
		Require(f, down)
		got := f.skipped
		if ci == "true" {
			got = f.failed
			if f.skipped != "" || !strings.Contains(f.failed, "CI=true") {
				t.Errorf("CI=true, service down: skipped %q, failed %q; want a failure", f.skipped, f.failed)
			}
		} else if f.failed != "" {
			t.Errorf("service down: failed %q, want a skip", f.failed)
		}
		for _, want := range []string{"needs Down", "connection refused", "KEEL_TEST_DOWN", ".ci/run"} {
			if !strings.Contains(got, want) {
				t.Errorf("CI=%q: %q does not say %q", ci, got, want)
			}
		}
	}
}
