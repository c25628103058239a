package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/server"
)

// defaultServer is where the operator commands find keel serve unless
// --server or KEEL_SERVER say otherwise.
const defaultServer = "http://127.0.0.1:7400"

// apiFlags are the flags every operator command shares.
type apiFlags struct {
	server string
	token  string
	json   bool
}

// addAPIFlags registers --server, --token and --json on cmd and its
// subcommands.
func addAPIFlags(cmd *cobra.Command, f *apiFlags) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&f.server, "server", "", "keel server URL (env KEEL_SERVER; default "+defaultServer+")")
	fs.StringVar(&f.token, "token", "", "API bearer token (env KEEL_TOKEN; prefer the variable: flags show in ps)")
	fs.BoolVar(&f.json, "json", false, "print the API's JSON instead of a table, for scripts")
}

// client returns the API client f describes.
func (f *apiFlags) client() (*apiClient, error) {
	base := f.server
	if base == "" {
		base = os.Getenv("KEEL_SERVER")
	}
	if base == "" {
		base = defaultServer
	}
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server must be an http(s) URL such as %s, got %q", defaultServer, base)
	}
	token := f.token
	if token == "" {
		token = os.Getenv("KEEL_TOKEN")
	}
	return &apiClient{base: u.String(), token: token, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// apiClient is a small client of keel serve's API v1, decoding into the
// server's wire types.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

// apiError is an answer other than 2xx, with the problem's detail.
type apiError struct {
	Status  int
	Problem server.Problem
}

func (e *apiError) Error() string {
	msg := e.Problem.Detail
	if msg == "" {
		msg = e.Problem.Title
	}
	return fmt.Sprintf("%s (HTTP %d)", msg, e.Status)
}

// do sends a request and returns the raw body of a 2xx answer, or an
// *apiError.
func (a *apiClient) do(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	u := a.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "keel-cli/"+keelVersion())
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cannot reach the keel server at %s: %v (start it with keel serve, or set --server / KEEL_SERVER)", a.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return b, nil
	}
	e := &apiError{Status: resp.StatusCode}
	if json.Unmarshal(b, &e.Problem) != nil || (e.Problem.Detail == "" && e.Problem.Title == "") {
		e.Problem.Title = strings.TrimSpace(resp.Status + ": " + truncate(strings.TrimSpace(string(b)), 200))
	}
	return nil, e
}

// call is do followed by decoding the answer into out (unless nil).
func (a *apiClient) call(ctx context.Context, method, path string, query url.Values, body, out any) ([]byte, error) {
	b, err := a.do(ctx, method, path, query, body)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("%s %s: unexpected answer: %w", method, path, err)
		}
	}
	return b, nil
}

func taskPath(id int64) string { return "/v1/tasks/" + strconv.FormatInt(id, 10) }

func (a *apiClient) enqueue(ctx context.Context, req server.EnqueueRequest) (server.Task, []byte, error) {
	var t server.Task
	b, err := a.call(ctx, http.MethodPost, "/v1/tasks", nil, req, &t)
	return t, b, err
}

func (a *apiClient) task(ctx context.Context, id int64) (server.Task, []byte, error) {
	var t server.Task
	b, err := a.call(ctx, http.MethodGet, taskPath(id), nil, nil, &t)
	return t, b, err
}

// taskByKey finds the id of the task whose idempotency key is key.
func (a *apiClient) taskByKey(ctx context.Context, key string) (int64, error) {
	l, err := a.list(ctx, "/v1/tasks", url.Values{"idempotency_key": {key}})
	if err != nil {
		return 0, err
	}
	if len(l.Tasks) == 0 {
		return 0, fmt.Errorf("no task has the idempotency key %q", key)
	}
	return l.Tasks[0].ID, nil
}

// change POSTs to a task's action route: "cancel" or "retry".
func (a *apiClient) change(ctx context.Context, id int64, action string) (server.Task, []byte, error) {
	var t server.Task
	b, err := a.call(ctx, http.MethodPost, taskPath(id)+"/"+action, nil, nil, &t)
	return t, b, err
}

// list reads one page of path (/v1/tasks or /v1/dead).
func (a *apiClient) list(ctx context.Context, path string, q url.Values) (server.TaskList, error) {
	var l server.TaskList
	_, err := a.call(ctx, http.MethodGet, path, q, nil, &l)
	return l, err
}

// bulk POSTs a dead-letter bulk request: action "requeue" or "purge".
func (a *apiClient) bulk(ctx context.Context, action string, req server.BulkRequest) (int64, error) {
	var r server.BulkResponse
	_, err := a.call(ctx, http.MethodPost, "/v1/dead/"+action, nil, req, &r)
	return r.Count, err
}

func (a *apiClient) stats(ctx context.Context) (server.Stats, []byte, error) {
	var s server.Stats
	b, err := a.call(ctx, http.MethodGet, "/v1/stats", nil, nil, &s)
	return s, b, err
}

func (a *apiClient) nodes(ctx context.Context) (server.NodeList, []byte, error) {
	var l server.NodeList
	b, err := a.call(ctx, http.MethodGet, "/v1/nodes", nil, nil, &l)
	return l, b, err
}

func (a *apiClient) system(ctx context.Context) (server.System, error) {
	var sys server.System
	_, err := a.call(ctx, http.MethodGet, "/v1/system", nil, nil, &sys)
	return sys, err
}

func (a *apiClient) queues(ctx context.Context) (server.QueueList, []byte, error) {
	var l server.QueueList
	b, err := a.call(ctx, http.MethodGet, "/v1/queues", nil, nil, &l)
	return l, b, err
}

func (a *apiClient) types(ctx context.Context) (server.TypeList, []byte, error) {
	var l server.TypeList
	b, err := a.call(ctx, http.MethodGet, "/v1/types", nil, nil, &l)
	return l, b, err
}

// setting changes a queue or type ("queues" or "types"): action "pause"
// or "resume" with a nil patch, or "" with the PATCH body. out receives
// the answer.
func (a *apiClient) setting(ctx context.Context, kind, name, action string, patch, out any) ([]byte, error) {
	path := "/v1/" + kind + "/" + url.PathEscape(name)
	if action != "" {
		return a.call(ctx, http.MethodPost, path+"/"+action, nil, nil, out)
	}
	return a.call(ctx, http.MethodPatch, path, nil, patch, out)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
