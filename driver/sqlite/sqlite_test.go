package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/drivertest"
	"github.com/keelq/keel/driver/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens a fresh database file for one test.
func open(t *testing.T) *sqlite.Driver {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
}

func openAt(t *testing.T, path string, opts sqlite.Options) *sqlite.Driver {
	t.Helper()
	d, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

func TestConformance(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, func(t *testing.T) driver.Driver {
		return openAt(t, filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{CallerClock: true})
	})
}

// TestBrakeScenarios: the automatic brake's scenarios, apart from the
// suite (they time drains). Not parallel: it runs before the suite's
// parallel tests start, so that neither loads the other's timings.
func TestBrakeScenarios(t *testing.T) {
	drivertest.RunBrakeScenarios(t, func(t *testing.T) driver.Driver { return open(t) })
}

func TestOpenRejectsBadOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := map[string]sqlite.Options{
		"synchronous OFF":   {Synchronous: "OFF"},
		"synchronous bogus": {Synchronous: "full; DROP TABLE x"},
		"negative busy":     {BusyTimeout: -time.Second},
		"negative readers":  {Readers: -1},
		"negative batch":    {MaxBatch: -1},
		"linger too long":   {Linger: time.Second},
	}
	for name, opts := range cases {
		path := filepath.Join(dir, name+".db")
		d, err := sqlite.Open(context.Background(), path, opts)
		if err == nil {
			d.Close()
			t.Fatalf("%s: Open accepted %+v", name, opts)
		}
		if _, statErr := os.Stat(path); !errors.Is(statErr, os.ErrNotExist) {
			t.Fatalf("%s: rejected options still created %s (%v)", name, path, statErr)
		}
	}
	if _, err := sqlite.Open(context.Background(), "", sqlite.Options{}); err == nil {
		t.Fatal("Open accepted an empty path")
	}
	if _, err := sqlite.Open(context.Background(), filepath.Join(dir, "missing", "dir", "keel.db"), sqlite.Options{}); err == nil {
		t.Fatal("Open accepted a path in a directory that does not exist")
	}
}

func TestPragmas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sync sqlite.Synchronous
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{"", 2}, {sqlite.SyncFull, 2}, {sqlite.SyncNormal, 1}} {
		d := openAt(t, filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{Synchronous: tc.sync})
		var mode string
		var sync int
		if err := d.DB().QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := d.DB().QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != tc.want {
			t.Fatalf("Synchronous %q: journal_mode %s synchronous %d, want wal %d", tc.sync, mode, sync, tc.want)
		}
	}
}

func TestMigrateIsRepeatable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keel.db")
	d := openAt(t, path, sqlite.Options{})
	ms, err := d.Migrations(context.Background())
	if err != nil || len(ms) == 0 {
		t.Fatalf("migrations: %v, %v", ms, err)
	}
	for _, m := range ms {
		if m.Applied {
			t.Fatalf("migration %s applied again", m.Name)
		}
	}
	// A second process opening the same file migrates nothing and sees the data.
	now := time.Now()
	res, err := d.Insert(context.Background(), []driver.InsertParams{{Queue: "default", Type: "t", Payload: []byte(`{}`),
		MaxAttempts: 1, RunAt: now, Timeout: time.Second, PayloadDigest: "d", Now: now}})
	if err != nil {
		t.Fatal(err)
	}
	d2 := openAt(t, path, sqlite.Options{})
	if _, err := d2.Get(context.Background(), res[0].Task.ID); err != nil {
		t.Fatalf("second handle: %v", err)
	}
}

func TestReopenKeepsTasks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keel.db")
	d, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	res, err := d.Insert(context.Background(), []driver.InsertParams{{Queue: "default", Type: "t", Payload: []byte(`{"a":1}`),
		MaxAttempts: 1, RunAt: now, Timeout: time.Second, PayloadDigest: "d", Now: now}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Insert(context.Background(), []driver.InsertParams{{Queue: "default", Type: "t", Payload: []byte(`{}`),
		MaxAttempts: 1, RunAt: now, Timeout: time.Second, PayloadDigest: "d", Now: now}}); err == nil {
		t.Fatal("insert on a closed driver succeeded")
	}
	d2 := openAt(t, path, sqlite.Options{})
	row, err := d2.Get(context.Background(), res[0].Task.ID)
	if err != nil || string(row.Payload) != `{"a":1}` {
		t.Fatalf("after reopen: %+v, %v", row, err)
	}
}

// TestTwoHandlesClaimDisjoint: two drivers on one file (as two processes
// would be) never claim the same task.
func TestTwoHandlesClaimDisjoint(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keel.db")
	a := openAt(t, path, sqlite.Options{})
	b := openAt(t, path, sqlite.Options{})
	now := time.Now()
	const n = 400
	params := make([]driver.InsertParams, n)
	for i := range params {
		params[i] = driver.InsertParams{Queue: "default", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1,
			RunAt: now, Timeout: time.Second, PayloadDigest: "d", Now: now}
	}
	if _, err := a.Insert(context.Background(), params); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	claimed := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, w := range []struct {
		name string
		d    *sqlite.Driver
	}{{"a1", a}, {"a2", a}, {"b1", b}, {"b2", b}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				rows, err := w.d.Claim(context.Background(), driver.ClaimParams{Queue: "default", Limit: 7, Owner: w.name, Now: now, LeaseExpiresAt: now.Add(time.Minute)})
				if err != nil {
					errs <- err
					return
				}
				if len(rows) == 0 {
					return
				}
				mu.Lock()
				for _, r := range rows {
					if prev, dup := claimed[r.ID]; dup {
						mu.Unlock()
						errs <- errors.New("task claimed by " + prev + " and " + w.name)
						return
					}
					claimed[r.ID] = w.name
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(claimed) != n {
		t.Fatalf("claimed %d of %d tasks", len(claimed), n)
	}
}

// TestEnqueueGivesUpWhileWriterIsHeld: while a caller's transaction holds
// the writer, an enqueue waits only as long as its context allows, and one
// that gave up is never written later.
func TestEnqueueGivesUpWhileWriterIsHeld(t *testing.T) {
	t.Parallel()
	d := open(t)
	c, err := keel.NewClient(keel.Config{Driver: d, Types: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := d.DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err = c.Enqueue(ctx, "t", map[string]int{"n": 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("enqueue while the writer is held: %v, want DeadlineExceeded", err)
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Fatalf("enqueue gave up after %v with a 50ms deadline", took)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A later enqueue goes through the same writer, after the abandoned one.
	info, err := c.Enqueue(context.Background(), "t", map[string]int{"n": 2})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.List(context.Background(), keel.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != info.ID {
		t.Fatalf("%d tasks stored, want only the second enqueue", len(list))
	}
}

// TestOpenPathWithSpecialCharacters: the file is created at exactly the
// path given, whatever characters it holds.
func TestOpenPathWithSpecialCharacters(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a dir with spaces, % and ü")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"keel?mode=ro.db", "keel#frag.db", "keel%20x.db", "ключ.db"} {
		path := filepath.Join(dir, name)
		d := openAt(t, path, sqlite.Options{})
		now := time.Now()
		if _, err := d.Insert(context.Background(), []driver.InsertParams{{Queue: "default", Type: "t", Payload: []byte(`{}`),
			MaxAttempts: 1, RunAt: now, Timeout: time.Second, PayloadDigest: "d", Now: now}}); err != nil {
			t.Fatalf("%s: insert: %v", name, err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s: database not at its path: %v", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(e.Name(), "-wal"), "-shm"), "-lock")
		if !slices.Contains([]string{"keel?mode=ro.db", "keel#frag.db", "keel%20x.db", "ключ.db"}, base) {
			t.Fatalf("unexpected file %q: a path was misread", e.Name())
		}
	}
}

// TestConcurrentInserts: Inserts from many goroutines at once, which the
// writer runs together, each get their own tasks; one key sent by many
// makes one task, and one key sent with different payloads is held by
// exactly one of them while the others are refused.
func TestConcurrentInserts(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := context.Background()
	now := time.Now().UTC()
	params := func(key, digest string) driver.InsertParams {
		return driver.InsertParams{Queue: "default", Type: "t", Payload: []byte(`{"n":1}`), MaxAttempts: 3,
			RunAt: now, Timeout: time.Minute, Now: now, IdemKey: key, PayloadDigest: digest}
	}
	const n = 64
	results := make([][]driver.InsertResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range n {
		var ps []driver.InsertParams
		switch g % 4 {
		case 0:
			ps = []driver.InsertParams{params("", "plain"), params("", "plain"), params("", "plain")}
		case 1:
			ps = []driver.InsertParams{params("k:shared", "same")}
		case 2:
			ps = []driver.InsertParams{params("k:contested", strings.Repeat("x", g))}
		case 3:
			ps = []driver.InsertParams{params("k:own-"+string(rune('A'+g)), "own"), params("", "plain")}
		}
		wg.Go(func() {
			<-start
			results[g], errs[g] = d.Insert(ctx, ps)
		})
	}
	close(start)
	wg.Wait()
	ids := map[int64]bool{}
	var shared []int64
	contested := 0
	for g := range n {
		if g%4 == 2 {
			if errs[g] == nil {
				contested++
				ids[results[g][0].Task.ID] = true
			} else if !errors.Is(errs[g], driver.ErrIdempotencyConflict) {
				t.Fatalf("goroutine %d: %v", g, errs[g])
			}
			continue
		}
		if errs[g] != nil {
			t.Fatalf("goroutine %d: %v", g, errs[g])
		}
		for _, r := range results[g] {
			got, err := d.Get(ctx, r.Task.ID)
			if err != nil || got.IdemKey != r.Task.IdemKey || got.PayloadDigest != r.Task.PayloadDigest {
				t.Fatalf("goroutine %d: task %d stored as %+v (%v), returned %+v", g, r.Task.ID, got, err, r.Task)
			}
			if r.Task.IdemKey == "k:shared" {
				shared = append(shared, r.Task.ID)
				if !r.Duplicate {
					ids[r.Task.ID] = true
				}
				continue
			}
			if r.Duplicate || ids[r.Task.ID] {
				t.Fatalf("goroutine %d: task %d returned twice or as a duplicate", g, r.Task.ID)
			}
			ids[r.Task.ID] = true
		}
	}
	if contested != 1 {
		t.Fatalf("%d inserts hold the contested key, want 1", contested)
	}
	for _, id := range shared {
		if id != shared[0] {
			t.Fatalf("the shared key made tasks %v, want one", shared)
		}
	}
	// 16×3 plain, 16×2 of their own, one shared, one contested.
	if want := 16*3 + 16*2 + 2; len(ids) != want {
		t.Fatalf("%d distinct tasks, want %d", len(ids), want)
	}
	counts, err := d.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	for _, r := range counts {
		stored += r.N
	}
	if stored != int64(len(ids)) {
		t.Fatalf("the counters hold %d tasks, want %d", stored, len(ids))
	}
}

// TestClaimedRowsAreTheirOwn: the writer reads claimed rows into one buffer
// it reuses; the rows a claim returned stay as they were through the
// claims after it.
func TestClaimedRowsAreTheirOwn(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := context.Background()
	now := time.Now()
	const n = 60
	params := make([]driver.InsertParams, n)
	for i := range params {
		params[i] = driver.InsertParams{Queue: "default", Type: fmt.Sprintf("type-%02d", i),
			Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)), Meta: []byte(fmt.Sprintf(`{"m":%d}`, i)), MaxAttempts: 1,
			RunAt: now, Timeout: time.Second, PayloadDigest: "d", Now: now}
	}
	if _, err := d.Insert(ctx, params); err != nil {
		t.Fatal(err)
	}
	var claims [][]driver.TaskRow
	for {
		rows, err := d.Claim(ctx, driver.ClaimParams{Queue: "default", Limit: 7, Owner: "w", Now: now,
			LeaseExpiresAt: now.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		claims = append(claims, rows)
	}
	seen := 0
	for _, rows := range claims {
		for _, r := range rows {
			i := int(r.ID - claims[0][0].ID)
			want := driver.TaskRow{Type: fmt.Sprintf("type-%02d", i), Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)),
				Meta: []byte(fmt.Sprintf(`{"m":%d}`, i))}
			if r.Type != want.Type || string(r.Payload) != string(want.Payload) || string(r.Meta) != string(want.Meta) ||
				r.State != driver.StateRunning || r.Attempt != 1 {
				t.Errorf("task %d after later claims: type %q payload %s meta %s state %s attempt %d; want %q %s %s running 1",
					r.ID, r.Type, r.Payload, r.Meta, r.State, r.Attempt, want.Type, want.Payload, want.Meta)
			}
			seen++
		}
	}
	if seen != n || len(claims) != (n+6)/7 {
		t.Fatalf("claimed %d tasks in %d claims, want %d in %d", seen, len(claims), n, (n+6)/7)
	}
}
