package chaos

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestProxyCut: the proxy forwards both ways; Cut closes every
// connection through it and refuses new ones until Restore.
func TestProxyCut(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }() //nolint:errcheck // ends with the connection
		}
	}()
	px, err := startProxy(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	roundTrip := func(c net.Conn) error {
		c.SetDeadline(time.Now().Add(2 * time.Second)) //nolint:errcheck // a net.Conn's
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil && line != "ping\n" {
			t.Fatalf("echoed %q", line)
		}
		return err
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", px.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1 := dial()
	if err := roundTrip(c1); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	if n := px.Cut(); n != 1 {
		t.Errorf("Cut closed %d connections, want 1", n)
	}
	if err := roundTrip(c1); err == nil {
		t.Error("a connection made before the cut still works")
	}
	if err := roundTrip(dial()); err == nil {
		t.Error("a connection made during the cut works")
	}
	px.Restore()
	if err := roundTrip(dial()); err != nil {
		t.Errorf("after Restore: %v", err)
	}
}

// TestKind: which database a DSN names.
func TestKind(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u@h/db": Postgres, "postgresql://u@h/db": Postgres,
		"mysql://u@h:3306/db": MariaDB, "root@tcp(127.0.0.1:3306)/test": MariaDB,
		"./keel.db": SQLite, "/var/lib/keel/keel.db": SQLite,
	} {
		if got := Kind(dsn); got != want {
			t.Errorf("Kind(%q) = %s, want %s", dsn, got, want)
		}
	}
}

// TestValidate: each bad option is named.
func TestValidate(t *testing.T) {
	good := Options{DSN: "./k.db", Command: testCommand}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.DSN = "" }, "no database"},
		{func(o *Options) { o.Scenarios = []string{"bogus"} }, `unknown scenario "bogus"`},
		{func(o *Options) { o.Workers = 17 }, "workers 17"},
		{func(o *Options) { o.Duration = time.Second }, "duration 1s"},
		{func(o *Options) { o.Command = nil }, "no worker command"},
		{func(o *Options) {
			o.Timing = DefaultTiming
			o.Timing.HeartbeatInterval = o.Timing.LeaseTTL
		}, "must be shorter than the lease"},
	} {
		o := good
		c.mod(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}
