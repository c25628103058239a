package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// rawPayload is the payload of every bench task, stored as given.
var rawPayload = json.RawMessage(benchPayload)

// benchHTTPClient is a plain Go client that keeps a connection per
// concurrent caller, as a well-configured producer does.
func benchHTTPClient(conns int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = conns, conns
	return &http.Client{Transport: t, Timeout: 30 * time.Second}
}

// enqueueLoad runs clients goroutines, each POSTing one task per request
// to url for d, and counts the 201 answers; any other answer stops it.
func enqueueLoad(ctx context.Context, url, token string, clients int, d time.Duration) (loadResult, error) {
	hc := benchHTTPClient(clients)
	defer hc.CloseIdleConnections()
	var ok atomic.Int64
	var firstErr error
	var once sync.Once
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(benchTaskBody))
				if err != nil {
					fail(err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := hc.Do(req)
				if err != nil {
					fail(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					fail(fmt.Errorf("POST %s: HTTP %d: %s", url, resp.StatusCode, body))
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return loadResult{count: ok.Load(), elapsed: time.Since(start)}, firstErr
}

// referenceEnqueue loads a plain net/http server that reads and decodes
// the same JSON body and answers 201 with a small JSON.
func referenceEnqueue(ctx context.Context, o httpBenchOptions) (loadResult, error) {
	var id atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Type    string          `json:"type"`
			Queue   string          `json:"queue"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || req.Type == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"type":%q,"state":"pending"}`+"\n", id.Add(1), req.Type)
	})
	url, closeSrv, err := serveLocal(h)
	if err != nil {
		return loadResult{}, err
	}
	defer closeSrv()
	return enqueueLoad(ctx, url+"/v1/tasks", "", o.clients, o.duration)
}

// noopTarget is an HTTP target that reads each request and answers 200
// with no body. It counts requests and can report when it saw n of them.
type noopTarget struct {
	url   string
	close func()
	hits  atomic.Int64

	mu    sync.Mutex
	first time.Time
	goal  int64
	done  chan loadResult
}

func startNoopTarget() (*noopTarget, error) {
	t := &noopTarget{}
	url, closeSrv, err := serveLocal(http.HandlerFunc(t.serve))
	if err != nil {
		return nil, err
	}
	t.url, t.close = url+"/", closeSrv
	return t, nil
}

func (t *noopTarget) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body) //nolint:errcheck // a no-op target
	n := t.hits.Add(1)
	t.mu.Lock()
	if t.first.IsZero() {
		t.first = time.Now()
	}
	if t.done != nil && n == t.goal {
		t.done <- loadResult{count: n, elapsed: time.Since(t.first)}
		t.done = nil
	}
	t.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// expect resets the counters; the channel gets the time from the next
// request to the n-th one.
func (t *noopTarget) expect(n int64) <-chan loadResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hits.Store(0)
	t.first, t.goal, t.done = time.Time{}, n, make(chan loadResult, 1)
	return t.done
}

// referenceDispatch POSTs o.n payloads to the target from o.workers
// goroutines of a plain Go client.
func referenceDispatch(ctx context.Context, t *noopTarget, o httpBenchOptions) (loadResult, error) {
	hc := benchHTTPClient(o.workers)
	defer hc.CloseIdleConnections()
	reached := t.expect(int64(o.n))
	var next atomic.Int64
	errs := make(chan error, o.workers)
	for range o.workers {
		go func() {
			for next.Add(1) <= int64(o.n) {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, strings.NewReader(benchPayload))
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body) //nolint:errcheck // drained for reuse
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("POST %s: HTTP %d", t.url, resp.StatusCode)
					return
				}
			}
			errs <- nil
		}()
	}
	var err error
	for range o.workers {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return loadResult{}, err
	}
	return <-reached, nil
}

// serveLocal serves h on a free loopback port until close is called.
func serveLocal(h http.Handler) (url string, closeSrv func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}
