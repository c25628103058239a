package idempotency_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/idempotency"
)

func Example() {
	dir, err := os.MkdirTemp("", "keel-idem")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	drv, err := sqlite.Open(context.Background(), filepath.Join(dir, "keel.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()

	// With a keel.Client, pass client.Driver().
	mw, err := idempotency.New(drv, idempotency.Options{})
	if err != nil {
		log.Fatal(err)
	}
	orders := 0
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "order %d", orders)
	})))
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(`{"sku":"a"}`))
		req.Header.Set("Idempotency-Key", "8e03978e")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s replayed=%t\n", resp.StatusCode, body, resp.Header.Get("Idempotent-Replayed") == "true")
	}
	// Output:
	// 201 order 1 replayed=false
	// 201 order 1 replayed=true
}
