package dashboard_test

import (
	"context"
	"log"
	"net/http"

	"github.com/keelq/keel"
	"github.com/keelq/keel/dashboard"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/server"
)

// Mount the dashboard under /keel/ in a program's own server, next to the
// API, with the same tokens.
func Example() {
	drv, err := sqlite.Open(context.Background(), "keel.db", sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	client, err := keel.NewClient(keel.Config{Driver: drv, AnyType: true})
	if err != nil {
		log.Fatal(err)
	}
	tokens := []server.Token{{Value: "a-long-admin-token", Role: server.RoleAdmin}}
	api, err := server.New(client, server.Options{Tokens: tokens})
	if err != nil {
		log.Fatal(err)
	}
	dash, err := dashboard.New(client, dashboard.Options{Tokens: tokens, Prefix: "/keel/"})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/keel/", dash) // no http.StripPrefix: it serves paths under Prefix
	log.Fatal(http.ListenAndServe("127.0.0.1:7400", mux))
}
