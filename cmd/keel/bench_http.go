package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel"
	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/driver/sqlite"
)

// The task types of the HTTP bench: enqueueType is only stored (its queue
// is not worked), dispatchType is POSTed to the no-op target.
const (
	enqueueType   = "bench.enqueue"
	enqueueQueue  = "bench-enqueue"
	dispatchType  = "bench.http"
	benchPayload  = `{"order":12345,"customer":"c-0042","items":[{"sku":"a-1","qty":2},{"sku":"b-7","qty":1}],"note":"keel bench"}`
	benchTaskBody = `{"type":"` + enqueueType + `","payload":` + benchPayload + `}`
)

type httpBenchOptions struct {
	load     string
	clients  int
	workers  int
	n        int
	duration time.Duration
	server   string
	token    string
	dir      string
	profiles benchProfiles
}

func newBenchHTTPCmd() *cobra.Command {
	var o httpBenchOptions
	cmd := &cobra.Command{
		Use:   "http",
		Short: "Measure keel serve's HTTP paths against plain net/http on this machine",
		Long: `bench http starts keel serve in this process on a new SQLite file
(synchronous=FULL, as keel serve runs by default) and measures its two HTTP
paths, each beside a plain Go net/http reference on the same machine:

  enqueue   C clients each POST one task per request to /v1/tasks for D;
            reference: a net/http server that decodes the same JSON body
            and answers 201 with a small JSON, under the same load
  dispatch  N tasks of a type with a url are stored first, then keel serve's
            W workers POST them to a no-op target (200); reference: W
            goroutines of a plain Go client POSTing the same payloads there

  keel bench http                              both loads, the defaults
  keel bench http --load enqueue --clients 64 --duration 10s
  keel bench http --load enqueue --server http://127.0.0.1:7400 --token T
  keel bench http --load dispatch -n 50000 --workers 64 --cpuprofile cpu.out`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHTTPBench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.load, "load", "both", "which load to run: enqueue, dispatch or both")
	f.IntVar(&o.clients, "clients", 32, "enqueue: concurrent HTTP clients, one task per request")
	f.DurationVar(&o.duration, "duration", 5*time.Second, "enqueue: how long each side (keel, reference) is loaded")
	f.IntVar(&o.workers, "workers", 64, "dispatch: keel serve's workers, and the reference client's goroutines")
	f.IntVarP(&o.n, "n", "n", 20000, "dispatch: tasks stored, then dispatched (and requests of the reference)")
	f.StringVar(&o.server, "server", "", "enqueue: load this running keel serve instead of one started here (its tasks are of type "+enqueueType+")")
	f.StringVar(&o.token, "token", "", "with --server: the bearer token to send")
	f.StringVar(&o.dir, "dir", "", "directory for the SQLite files enqueue.db and dispatch.db, which must not exist (default: a temporary directory, removed afterwards)")
	o.profiles.flags(f, "keel's measured phases")
	return cmd
}

func (o httpBenchOptions) validate() error {
	switch {
	case o.load != "enqueue" && o.load != "dispatch" && o.load != "both":
		return fmt.Errorf("--load must be enqueue, dispatch or both, got %q", o.load)
	case o.clients < 1:
		return fmt.Errorf("--clients must be positive, got %d", o.clients)
	case o.workers < 1:
		return fmt.Errorf("--workers must be positive, got %d", o.workers)
	case o.n < 1:
		return fmt.Errorf("-n must be positive, got %d", o.n)
	case o.duration <= 0:
		return fmt.Errorf("--duration must be positive, got %v", o.duration)
	case o.server != "" && o.load != "enqueue":
		return errors.New("--server measures the enqueue load only: add --load enqueue")
	case o.server != "" && o.dir != "":
		return errors.New("--server and --dir are exclusive")
	case o.token != "" && o.server == "":
		return errors.New("--token needs --server")
	}
	return nil
}

func runHTTPBench(ctx context.Context, out io.Writer, o httpBenchOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	tmp, err := os.MkdirTemp("", "keel-bench-http-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dir := cmp.Or(o.dir, tmp)
	enqDB, disDB := filepath.Join(dir, "enqueue.db"), filepath.Join(dir, "dispatch.db")
	for _, db := range []string{enqDB, disDB} {
		if _, err := os.Stat(db); err == nil {
			return fmt.Errorf("%s exists: the bench needs new files", db)
		}
	}
	defer o.profiles.stop() //nolint:errcheck // stopped and checked below on success

	// The references run first, so that the profiles cover keel only.
	var refEnq, refDis loadResult
	if o.load != "dispatch" {
		if refEnq, err = referenceEnqueue(ctx, o); err != nil {
			return fmt.Errorf("reference enqueue: %w", err)
		}
	}
	tg, err := startNoopTarget()
	if err != nil {
		return err
	}
	defer tg.close()
	if o.load != "enqueue" {
		if refDis, err = referenceDispatch(ctx, tg, o); err != nil {
			return fmt.Errorf("reference dispatch: %w", err)
		}
		if err := storeDispatchTasks(ctx, disDB, o.n); err != nil {
			return fmt.Errorf("store the dispatch tasks: %w", err)
		}
	}
	if err := o.profiles.start(); err != nil {
		return err
	}
	if o.load != "dispatch" {
		keelEnq, where, err := keelEnqueue(ctx, tmp, enqDB, tg, o)
		if err != nil {
			return fmt.Errorf("keel enqueue: %w", err)
		}
		fmt.Fprintf(out, "enqueue: %d clients, one task per POST /v1/tasks, %v each (%s)\n", o.clients, o.duration, where)
		printPair(out, "keel serve", keelEnq, "plain net/http server", refEnq, "tasks/s", "requests/s")
	}
	if o.load != "enqueue" {
		keelDis, err := keelDispatch(ctx, tmp, disDB, tg, o)
		if err != nil {
			return fmt.Errorf("keel dispatch: %w", err)
		}
		fmt.Fprintf(out, "dispatch: %d tasks of an HTTP-target type, %d workers, a no-op target (SQLite, synchronous=FULL)\n", o.n, o.workers)
		printPair(out, "keel serve", keelDis, "plain Go client", refDis, "tasks/s", "requests/s")
	}
	return o.profiles.stop()
}

// loadResult is one measured run: how many requests or tasks, how long.
type loadResult struct {
	count   int64
	elapsed time.Duration
}

func (r loadResult) rate() float64 { return float64(r.count) / r.elapsed.Seconds() }

func printPair(out io.Writer, name string, k loadResult, refName string, ref loadResult, unit, refUnit string) {
	fmt.Fprintf(out, "  %-22s %8d in %-8v %9.0f %s\n", name, k.count, k.elapsed.Round(time.Millisecond), k.rate(), unit)
	fmt.Fprintf(out, "  %-22s %8d in %-8v %9.0f %s\n", refName, ref.count, ref.elapsed.Round(time.Millisecond), ref.rate(), refUnit)
	fmt.Fprintf(out, "  ratio keel/reference   %.2f\n", k.rate()/ref.rate())
}

// benchServeConfig is the keel.toml of the bench's keel serve: the
// product's defaults but a free port, warnings-only logs, W workers, the
// enqueue type on an unworked queue and the dispatch type POSTing to url.
func benchServeConfig(dir, db, url string, workers int) (*config.Config, error) {
	path := filepath.Join(dir, "keel.toml")
	text := fmt.Sprintf(`listen = "127.0.0.1:0"
shutdown_timeout = "30s"
[database]
db = %q
[log]
level = "warn"
[queues.default]
workers = %d
[types.%q]
queue = %q
[types.%q]
url = %q
`, db, workers, enqueueType, enqueueQueue, dispatchType, url)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return nil, err
	}
	return config.Load(config.Options{Path: path, Environ: []string{}})
}

// startBenchServe runs keel serve (runServe, as the command does) with cfg
// until the returned stop is called; it returns the API's base URL.
func startBenchServe(ctx context.Context, cfg *config.Config) (string, func() error, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &listenWatcher{addr: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, func() {}, cfg, w) }()
	select {
	case addr := <-w.addr:
		return addr, func() error { cancel(); return <-done }, nil
	case err := <-done:
		cancel()
		return "", nil, fmt.Errorf("keel serve: %w", err)
	case <-time.After(30 * time.Second):
		cancel()
		return "", nil, errors.New("keel serve did not start in 30s")
	}
}

// listenWatcher passes keel serve's stderr on to ours, but for the line
// saying where it listens, whose address it hands over.
type listenWatcher struct {
	addr chan string
}

func (l *listenWatcher) Write(p []byte) (int, error) {
	const prefix = "keel: listening on "
	for _, line := range strings.Split(string(p), "\n") {
		if addr, ok := strings.CutPrefix(line, prefix); ok {
			select {
			case l.addr <- strings.TrimSpace(addr):
			default:
			}
		} else if line != "" {
			fmt.Fprintln(os.Stderr, line)
		}
	}
	return len(p), nil
}

// keelEnqueue runs the enqueue load against --server, or against a keel
// serve started on db.
func keelEnqueue(ctx context.Context, dir, db string, tg *noopTarget, o httpBenchOptions) (loadResult, string, error) {
	if o.server != "" {
		r, err := enqueueLoad(ctx, strings.TrimSuffix(o.server, "/")+"/v1/tasks", o.token, o.clients, o.duration)
		return r, "keel serve at " + o.server, err
	}
	cfg, err := benchServeConfig(dir, db, tg.url, o.workers)
	if err != nil {
		return loadResult{}, "", err
	}
	base, stop, err := startBenchServe(ctx, cfg)
	if err != nil {
		return loadResult{}, "", err
	}
	r, err := enqueueLoad(ctx, base+"/v1/tasks", "", o.clients, o.duration)
	return r, "SQLite, synchronous=FULL", errors.Join(err, stop())
}

// storeDispatchTasks stores n tasks of the dispatch type in a new db.
func storeDispatchTasks(ctx context.Context, db string, n int) error {
	drv, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		return err
	}
	defer drv.Close()
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{dispatchType}})
	if err != nil {
		return err
	}
	specs := make([]keel.TaskSpec, 0, 1000)
	for left := n; left > 0; left -= len(specs) {
		specs = specs[:0]
		for range min(left, 1000) {
			specs = append(specs, keel.TaskSpec{Type: dispatchType, Payload: rawPayload})
		}
		if _, err := c.EnqueueMany(ctx, specs); err != nil {
			return err
		}
	}
	return nil
}

// keelDispatch starts keel serve on db, which holds o.n stored tasks of
// the dispatch type; its workers POST them to the target. It measures from
// the target's first request to its n-th, and checks, once keel serve has
// stopped, that every task succeeded.
func keelDispatch(ctx context.Context, dir, db string, tg *noopTarget, o httpBenchOptions) (loadResult, error) {
	cfg, err := benchServeConfig(dir, db, tg.url, o.workers)
	if err != nil {
		return loadResult{}, err
	}
	reached := tg.expect(int64(o.n))
	_, stop, err := startBenchServe(ctx, cfg)
	if err != nil {
		return loadResult{}, err
	}
	var r loadResult
	select {
	case r = <-reached:
	case <-time.After(10*time.Minute + time.Duration(o.n)*time.Millisecond):
		err = fmt.Errorf("the target got %d of %d requests", tg.hits.Load(), o.n)
	}
	if err := errors.Join(err, stop()); err != nil {
		return loadResult{}, err
	}
	drv, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		return loadResult{}, err
	}
	defer drv.Close()
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{dispatchType}})
	if err != nil {
		return loadResult{}, err
	}
	counts, err := c.Counts(ctx)
	if err != nil {
		return loadResult{}, err
	}
	if done := counts[keel.DefaultQueue][keel.StateSucceeded]; done != int64(o.n) {
		return loadResult{}, fmt.Errorf("expected %d succeeded tasks, found %d", o.n, done)
	}
	return r, nil
}
