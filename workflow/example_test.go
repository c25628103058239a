package workflow_test

import (
	"context"
	"fmt"
	"log"

	"github.com/keelq/keel"
	"github.com/keelq/keel/workflow"
)

// Two reports, then one e-mail once both succeeded.
func ExampleEnqueue() {
	ctx := context.Background()
	var client *keel.Client // a client on your driver, handling the three types
	w, _, err := workflow.Enqueue(ctx, client, workflow.Spec{
		Name: "monthly reports",
		Tasks: []workflow.Task{
			{Name: "sales", TaskSpec: keel.TaskSpec{Type: "report.generate", Payload: map[string]string{"report": "sales"}}},
			{Name: "stock", TaskSpec: keel.TaskSpec{Type: "report.generate", Payload: map[string]string{"report": "stock"}}},
			{Name: "mail", Needs: []string{"sales", "stock"}, TaskSpec: keel.TaskSpec{Type: "report.mail"}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("workflow", w.ID)
}
