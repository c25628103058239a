package server_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/server"
)

// Mount the API in a program's own HTTP server, with one token per role.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "keel-example")
	defer os.RemoveAll(dir)
	drv, err := sqlite.Open(context.Background(), filepath.Join(dir, "keel.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	client, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"email.send"}})
	if err != nil {
		log.Fatal(err)
	}
	api, err := server.New(client, server.Options{Tokens: []server.Token{
		{Value: "admin-secret", Role: server.RoleAdmin},
		{Value: "producer-secret", Role: server.RoleEnqueue},
	}})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/healthz", api)
	srv := httptest.NewServer(mux) // a real program calls http.ListenAndServe
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL+"/v1/tasks", strings.NewReader(`{"type":"email.send","payload":{"to":"ada@example.com"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer producer-secret")
	req.Header.Set("Idempotency-Key", "signup-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status, resp.Header.Get("Location"))
	// Output: 201 Created /v1/tasks/1
}
