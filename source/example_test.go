package source_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/source"
)

// A Go program consumes a RabbitMQ queue into tasks of "order.import"; the
// order_id field of each JSON body is the natural key, so a message
// delivered twice makes one task.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "keel-example")
	defer os.RemoveAll(dir)
	drv, err := sqlite.Open(ctx, filepath.Join(dir, "keel.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()
	client, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"order.import"}})
	if err != nil {
		log.Fatal(err)
	}
	src, err := source.New(client, source.Config{
		Name: "orders", Kind: source.KindRabbitMQ,
		URL: "amqp://guest:guest@127.0.0.1:5672/", Queue: "keel-example-orders",
		Type: "order.import", Key: "/order_id",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := src.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer src.Stop(ctx)
	fmt.Println("consuming", src.Name(), "into", src.Config().Type)
	// Output: consuming orders into order.import
}
