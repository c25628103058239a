package drivertest

import (
	"fmt"
	"slices"
	"sync"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// engineTests run keel.Client on the driver.
var engineTests = []test{
	{"SucceedWithResult", testEngineSucceed},
	{"OnDeadRescued", testEngineOnDeadRescued},
	{"RetryBackoffThenDead", testEngineRetryBackoffThenDead},
	{"TypeBackoff", testEngineTypeBackoff},
	{"Permanent", testEnginePermanent},
	{"UndecodablePayloadIsPermanent", testEngineUndecodable},
	{"RetryAfter", testEngineRetryAfter},
	{"Snooze", testEngineSnooze},
	{"Timeout", testEngineTimeout},
	{"TimeoutHandlerIgnoresContext", testEngineTimeoutIgnored},
	{"Panic", testEnginePanic},
	{"ErrorHistoryKeepsLast20", testEngineErrorHistory},
	{"ClaimOrder", testEngineClaimOrder},
	{"ConcurrencyLimit", testEngineConcurrencyLimit},
	{"TwoClientsRunEachTaskOnce", testEngineTwoClients},
	{"QueuesServedSeparately", testEngineQueues},
	{"TypeDefaults", testEngineTypeDefaults},
	{"StoredTypeDefaults", testEngineStoredDefaults},
	{"DeclaredTypeNotClaimed", testEngineDeclaredNotClaimed},
	{"MaxSnoozes", testEngineMaxSnoozes},
	{"ScheduledNotEarly", testEngineScheduled},
	{"CancelPendingAndRetry", testEngineCancelPending},
	{"CancelRunningInProcess", testEngineCancelRunning},
	{"CancelRunningElsewhere", testEngineCancelElsewhere},
	{"RetryFromDead", testEngineRetryFromDead},
	{"WrongStateAndNotFound", testEngineWrongState},
	{"UniqueBy", testEngineUniqueBy},
	{"IdempotencyKeyConcurrent", testEngineIdemConcurrent},
	{"IdempotencyConflict", testEngineIdemConflict},
	{"ResubmitAfterDeadOrCancelled", testEngineResubmit},
	{"EnqueueTx", testEngineEnqueueTx},
	{"CompleteTx", testEngineCompleteTx},
	{"CompleteTxLeaseLost", testEngineCompleteTxLeaseLost},
	{"Steps", testEngineSteps},
	{"StepLeaseLost", testEngineStepLeaseLost},
	{"StaleWorkerRescuedByOtherClient", testEngineStaleWorker},
	{"NodeRegistry", testEngineNodes},
	{"NodeRunning", testEngineNodeRunning},
	{"HeartbeatCancelsLostTask", testEngineHeartbeatLost},
	{"HeartbeatFailingCancelsHandlers", testEngineHeartbeatFailing},
	{"ClaimOutcomeUnknown", testEngineClaimOutcomeUnknown},
	{"FinishOutcomeUnknown", testEngineFinishOutcomeUnknown},
	{"EnqueueContextEndsWritesAllOrNothing", testEngineEnqueueCancelled},
	{"StaleAttemptDoesNotHideReclaimedOne", testEngineSelfReclaim},
	{"CancelledAttemptCannotCompleteRetriedTask", testEngineCancelRetryReclaim},
	{"StopReleasesBlockedTasks", testEngineStopForced},
	{"StopWaitsForFinishingTasks", testEngineStopGraceful},
	{"StopDoesNotWaitForHandlerIgnoringContext", testEngineStopIgnored},
	{"QueuePauseAcrossNodes", testEngineQueuePause},
	{"QueueConcurrencySetting", testEngineQueueConcurrency},
	{"TypePause", testEngineTypePause},
	{"TypeConcurrencySetting", testEngineTypeConcurrency},
	{"ClusterConcurrency", testEngineClusterConcurrency},
	{"LimitedDoesNotDelayOthers", testEngineLimitedDoesNotDelay},
	{"RateLimit", testEngineRateLimit},
	{"RampAdvances", testEngineRampAdvances},
	{"RampStops", testEngineRampStops},
	{"TypeOverrides", testEngineTypeOverrides},
	{"SettingsBadInputWritesNothing", testEngineSettingsBadInput},
	{"BulkDeadLetters", testEngineBulkDeadLetters},
	{"ETAAndStats", testEngineETAAndStats},
	{"RetryWakesOnTime", testEngineRetryWakesOnTime},
	{"RunawayHandlersStopClaims", testEngineRunawayHandlersStopClaims},
	{"RunAtRange", testEngineRunAtRange},
	{"Traces", testEngineTraces},
	{"TracesEnqueueMany", testEngineTracesMany},
	{"Archival", testEngineArchival},
	{"Batch", testEngineBatch},
	{"BatchOpen", testEngineBatchOpen},
	{"BatchBadInput", testEngineBatchBadInput},
	{"BatchFinishOnce", testEngineBatchFinishOnce},
	{"SequenceOrder", testEngineSequenceOrder},
	{"SequenceDeadHolds", testEngineSequenceDeadHolds},
	{"SequenceCancelReleases", testEngineSequenceCancelReleases},
	{"SequenceBadInput", testEngineSequenceBadInput},
	{"WorkflowDiamond", testEngineWorkflowDiamond},
	{"WorkflowDeadCascades", testEngineWorkflowDeadCascades},
	{"WorkflowContinue", testEngineWorkflowContinue},
	{"WorkflowBadInput", testEngineWorkflowBadInput},
	{"WorkflowHeld", testEngineWorkflowHeld},
	{"WorkflowPrune", testEngineWorkflowPrune},
	{"Alerts", testEngineAlerts},
	{"AlertCurrent", testEngineAlertCurrent},
	{"Drill", testEngineDrill},
	{"KeelWorkApart", testEngineKeelWorkApart},
	{"ScheduleRunOnce", testEngineScheduleRunOnce},
	{"ScheduleSkip", testEngineScheduleSkip},
	{"SchedulePauseTrigger", testEngineSchedulePauseTrigger},
}

// args is the payload of the suite's tasks.
type args struct {
	N int `json:"n"`
}

// recorder counts handler calls by payload.
type recorder struct {
	mu    sync.Mutex
	calls []int
}

func (r *recorder) add(n int) {
	r.mu.Lock()
	r.calls = append(r.calls, n)
	r.mu.Unlock()
}

func (r *recorder) list() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recorder) count() int { return len(r.list()) }

// worker returns a started client with fn as the handler of "dt.task".
func (e *env) worker(cfg keel.Config, fn keel.HandlerFunc[args], opts ...keel.Option) *keel.Client {
	e.t.Helper()
	h := keel.NewHandlers()
	keel.Handle(h, "dt.task", fn, opts...)
	cfg.Handlers = h
	c := e.newClient(cfg)
	e.startClient(c)
	return c
}

func (e *env) enqueue(c *keel.Client, n int, opts ...keel.Option) *keel.TaskInfo {
	e.t.Helper()
	info, err := c.Enqueue(e.ctx, "dt.task", args{N: n}, opts...)
	if err != nil {
		e.t.Fatalf("enqueue: %v", err)
	}
	return info
}

// waitErrors waits until task id has n errors and is not running.
func (e *env) waitErrors(id int64, n int) *driver.TaskRow {
	e.t.Helper()
	return e.waitTask(id, fmt.Sprintf("%d errors, not running", n), func(r *driver.TaskRow) bool {
		return len(r.Errors) == n && r.State != driver.StateRunning
	})
}

// enqueuer returns a client that only enqueues "dt.task" and "dt.other".
func (e *env) enqueuer() *keel.Client {
	return e.newClient(keel.Config{Types: []string{"dt.task", "dt.other"}})
}
