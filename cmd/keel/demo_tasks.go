package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/keelq/keel"
)

// The demo's task types.
const (
	demoTypeEmail  = "email.send"
	demoTypeReport = "report.build"
	demoTypeImage  = "image.resize"
)

var demoTypes = []string{demoTypeEmail, demoTypeReport, demoTypeImage}

// Payloads. Seq numbers the task in the plan, which says how the simulated
// handler behaves.
type (
	emailArgs struct {
		Seq      int    `json:"seq"`
		To       string `json:"to"`
		Template string `json:"template"`
	}
	reportArgs struct {
		Seq     int    `json:"seq"`
		Account string `json:"account"`
		Month   string `json:"month"`
	}
	imageArgs struct {
		Seq    int    `json:"seq"`
		Image  string `json:"image"`
		Width  int    `json:"width"`
		Format string `json:"format"`
	}
)

// demoTask is one planned task and how its handler will behave.
type demoTask struct {
	seq      int
	typ      string
	payload  any
	opts     []keel.Option
	idemKey  string // set for the submissions repeated to show dedupe
	uniqueBy string
	id       int64 // once enqueued

	// Simulated behaviour: at most one applies.
	failFirst  int  // attempts that fail with a transient error before success
	panicFirst bool // the first attempt panics
	retryAfter bool // the first attempt asks to retry after demoRetryAfter
	slowFirst  bool // the first attempt overruns its timeout
	snooze     bool // the first run snoozes for demoSnooze
	// deadReason is set for the planned dead letters: deadPermanent or
	// deadPoison.
	deadReason string

	snoozed atomic.Bool
	applied atomic.Int32 // successful runs
}

const (
	deadPermanent = "permanent"
	deadPoison    = "poison"
)

// demoPlan lays out n tasks. Every 50th task from seq 7 is a bounced email,
// from 23 an unsupported image, from 41 a poison report; the rest get a
// random type and, sometimes, a recoverable failure.
func demoPlan(n int, seed uint64) []*demoTask {
	rng := rand.New(rand.NewPCG(seed, seed^0x6b65656c))
	plan := make([]*demoTask, n)
	emailKeys, reportKeys := 0, 0
	for seq := range n {
		t := &demoTask{seq: seq}
		plan[seq] = t
		switch seq % 50 {
		case 7:
			t.typ, t.deadReason = demoTypeEmail, deadPermanent
		case 23:
			t.typ, t.deadReason = demoTypeImage, deadPermanent
		case 41:
			t.typ, t.deadReason = demoTypeReport, deadPoison
		default:
			switch r := rng.IntN(10); {
			case r < 5:
				t.typ = demoTypeEmail
			case r < 8:
				t.typ = demoTypeImage
			default:
				t.typ = demoTypeReport
			}
		}
		user := fmt.Sprintf("user%03d@example.com", rng.IntN(1000))
		switch t.typ {
		case demoTypeEmail:
			a := emailArgs{Seq: seq, To: user, Template: "receipt"}
			if t.deadReason != "" {
				a.To = fmt.Sprintf("bounce%d@invalid.example", seq)
			}
			switch {
			case t.deadReason == "" && emailKeys < 2:
				emailKeys++
				a.Template = "welcome"
				t.idemKey = fmt.Sprintf("welcome-%d", seq)
				t.opts = append(t.opts, keel.IdempotencyKey(t.idemKey))
			case rng.IntN(10) == 0:
				a.Template = "password-reset"
				t.opts = append(t.opts, keel.Priority(50))
			}
			t.payload = a
		case demoTypeReport:
			a := reportArgs{Seq: seq, Account: fmt.Sprintf("acct-%d", rng.IntN(100)), Month: fmt.Sprintf("2025-%02d", 1+rng.IntN(12))}
			if t.deadReason == "" && reportKeys < 2 {
				reportKeys++
				t.uniqueBy = a.Account + "/" + a.Month
				t.opts = append(t.opts, keel.UniqueBy(t.uniqueBy))
			}
			t.payload = a
		case demoTypeImage:
			a := imageArgs{Seq: seq, Image: fmt.Sprintf("img-%05d.jpg", seq), Width: []int{320, 640, 1280}[rng.IntN(3)], Format: "webp"}
			if t.deadReason != "" {
				a.Format = "tiff"
			}
			t.payload = a
		}
		if t.deadReason != "" {
			continue
		}
		switch r := rng.IntN(100); {
		case r < 12:
			t.failFirst = 1
		case r < 16:
			t.failFirst = 2
		case r < 18:
			t.panicFirst = true
		case r < 22 && t.typ == demoTypeImage:
			t.retryAfter = true
		case r < 25 && t.typ == demoTypeImage:
			t.slowFirst = true
		case r < 30 && t.typ == demoTypeReport:
			t.snooze = true
		}
	}
	return plan
}

func demoCounters() map[string]*atomic.Int64 {
	m := map[string]*atomic.Int64{}
	for _, t := range demoTypes {
		m[t] = new(atomic.Int64)
	}
	return m
}

// handlers registers the three types with their default options.
func (d *demoRun) handlers() *keel.Handlers {
	h := keel.NewHandlers()
	keel.Handle(h, demoTypeEmail, func(ctx context.Context, t *keel.Task[emailArgs]) error {
		if err := d.simulate(ctx, t.Args.Seq, t.Type, t.Attempt); err != nil {
			return err
		}
		return t.SetResult(map[string]string{"message_id": fmt.Sprintf("<%d.%d@keel.demo>", t.ID, t.Attempt)})
	}, keel.Priority(10))
	keel.Handle(h, demoTypeReport, func(ctx context.Context, t *keel.Task[reportArgs]) error {
		if err := d.simulate(ctx, t.Args.Seq, t.Type, t.Attempt); err != nil {
			return err
		}
		return t.SetResult(map[string]any{"account": t.Args.Account, "month": t.Args.Month, "rows": 100 + t.Args.Seq})
	}, keel.Priority(-5))
	keel.Handle(h, demoTypeImage, func(ctx context.Context, t *keel.Task[imageArgs]) error {
		if err := d.simulate(ctx, t.Args.Seq, t.Type, t.Attempt); err != nil {
			return err
		}
		return t.SetResult(map[string]string{"thumbnail": fmt.Sprintf("img-%05d-%d.webp", t.Args.Seq, t.Args.Width)})
	}, keel.Timeout(demoImageTimeout))
	return h
}

var errTransient = map[string]string{
	demoTypeEmail:  "smtp: 421 service not available, try again later",
	demoTypeReport: "query ledger: database is locked",
	demoTypeImage:  "fetch original: connection reset by peer",
}

// simulate does a few milliseconds of work and then fails the way the plan
// says.
func (d *demoRun) simulate(ctx context.Context, seq int, typ string, attempt int) error {
	d.runs[typ].Add(1)
	if seq < 0 || seq >= len(d.plan) {
		return keel.Permanent(fmt.Errorf("seq %d is not in the plan", seq))
	}
	p := d.plan[seq]
	work := time.NewTimer(time.Duration(2+rand.IntN(6)) * time.Millisecond)
	select {
	case <-work.C:
	case <-ctx.Done():
		work.Stop()
		return context.Cause(ctx)
	}
	switch {
	case p.deadReason == deadPermanent && typ == demoTypeEmail:
		return keel.Permanent(errors.New("smtp: 550 5.1.1 mailbox unavailable"))
	case p.deadReason == deadPermanent:
		return keel.Permanent(errors.New("decode image: unsupported format tiff"))
	case p.deadReason == deadPoison:
		panic(fmt.Sprintf("report %d: corrupt ledger entry (simulated poison task)", seq))
	case attempt <= p.failFirst:
		return fmt.Errorf("%s (simulated, attempt %d)", errTransient[typ], attempt)
	case p.panicFirst && attempt == 1:
		panic("simulated crash: index out of range [3] with length 3")
	case p.retryAfter && attempt == 1:
		d.retryAfters[typ].Add(1)
		return keel.RetryAfter(errors.New("image store busy: 503 Retry-After"), demoRetryAfter)
	case p.slowFirst && attempt == 1:
		<-ctx.Done() // overrun the type's timeout
		return fmt.Errorf("resize: %w", context.Cause(ctx))
	case p.snooze && !p.snoozed.Swap(true):
		d.snoozes[typ].Add(1)
		return keel.Snooze(demoSnooze)
	}
	p.applied.Add(1)
	return nil
}
