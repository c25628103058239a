package drivertest

import (
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// driverTests call the driver directly, with explicit owners and times.
var driverTests = []test{
	{"InsertAndGet", testInsertAndGet},
	{"ClaimOrder", testClaimOrder},
	{"ClaimBatchOrder", testClaimBatchOrder},
	{"ClaimNotBeforeRunAt", testClaimNotBeforeRunAt},
	{"ClaimMarksRunning", testClaimMarksRunning},
	{"ClaimReturnsMeta", testClaimMeta},
	{"Succeed", testSucceed},
	{"RetryAndDead", testRetryAndDead},
	{"Refund", testRefund},
	{"FinishMixedBatch", testFinishMixedBatch},
	{"FencingAfterRescue", testFencingAfterRescue},
	{"RescueLastAttemptDead", testRescueLastAttemptDead},
	{"RescueLimit", testRescueLimit},
	{"RescueSkipsRenewedLease", testRescueSkipsRenewedLease},
	{"Heartbeat", testHeartbeat},
	{"CancelAndRetry", testCancelAndRetry},
	{"CancelRunningRejectsFinish", testCancelRunningRejectsFinish},
	{"WrongStateAndNotFound", testWrongStateAndNotFound},
	{"RetryKeyHeldByNewerTask", testRetryKeyHeldByNewerTask},
	{"ErrorHistoryKeepsLast20", testErrorHistoryKeepsLast20},
	{"Idempotency", testDriverIdempotency},
	{"IdempotencyConflictWritesNothing", testIdempotencyConflictWritesNothing},
	{"BatchKeysOppositeOrders", testBatchKeysOppositeOrders},
	{"KeyReleasedByDeadAndCancelled", testKeyReleased},
	{"ListAndCounts", testListAndCounts},
	{"CountsByType", testCountsByType},
	{"ListCreatedFilters", testListCreatedFilters},
	{"ListNameFilters", testListNameFilters},
	{"ListFinishedFilters", testListFinishedFilters},
	{"ClaimExcludeTypes", testClaimExcludeTypes},
	{"ClaimTypes", testClaimTypes},
	{"DeclareTypes", testDeclareTypes},
	{"SnoozeCounter", testSnoozeCounter},
	{"SucceedKeepsLeaseOwner", testSucceedKeepsLeaseOwner},
	{"LiveCounters", testLiveCounters},
	{"LiveCountersBulk", testLiveCountersBulk},
	{"History", testHistory},
	{"CountAhead", testCountAhead},
	{"RetryMatchingLikeRetry", testRetryMatchingLikeRetry},
	{"RetryMatchingFilters", testRetryMatchingFilters},
	{"RetryMatchingSkipsHeldKeys", testRetryMatchingSkipsHeldKeys},
	{"PurgeMatching", testPurgeMatching},
	{"BulkByIDs", testBulkByIDs},
	{"RecentFinished", testRecentFinished},
	{"GetByKey", testGetByKey},
	{"PatchSetting", testPatchSetting},
	{"PatchSettingConcurrent", testPatchSettingConcurrent},
	{"ListSettingsOrder", testListSettingsOrder},
	{"Leadership", testLeadership},
	{"NodeRegistry", testNodeRegistry},
	{"PruneNodes", testPruneNodes},
	{"InsertTx", testInsertTx},
	{"FinishTx", testFinishTx},
	{"InsertTxConflictWritesNothing", testInsertTxConflict},
	{"RunAtRange", testRunAtRange},
	{"PoolStats", testPoolStats},
	{"Archive", testArchive},
	{"ArchiveIdempotencyKey", testArchiveIdempotencyKey},
	{"PurgeArchive", testPurgeArchive},
	{"ArchiveBadParams", testArchiveBadParams},
	{"Alerts", testAlertLifecycle},
	{"AlertUpdate", testAlertUpdate},
	{"AlertFireConcurrent", testAlertFireConcurrent},
	{"AlertList", testAlertList},
	{"AlertDeliveries", testAlertDeliveries},
	{"AlertBadInputWritesNothing", testAlertBadInput},
	{"Meta", testMeta},
	{"FollowUpOnFinish", testFollowUpOnFinish},
	{"FollowUpOnRescue", testFollowUpOnRescue},
	{"DeclareTypesOnDead", testDeclareTypesOnDead},
	{"BrakeTransitions", testBrakeTransitions},
	{"BrakeProbeOnce", testBrakeProbeOnce},
	{"BrakeConfig", testBrakeConfig},
	{"ScheduleUpsert", testScheduleUpsert},
	{"ScheduleTickOnce", testScheduleTickOnce},
	{"SchedulePause", testSchedulePause},
	{"ScheduleBadInputWritesNothing", testScheduleBadInput},
	{"Steps", testSteps},
	{"StepsFenced", testStepsFenced},
	{"StepsBadParams", testStepsBadParams},
	{"StepsKeptByRetryAndArchive", testStepsKeptByRetryAndArchive},
	{"ClaimLimitedConcurrency", testClaimLimitedConcurrency},
	{"ClaimLimitedConcurrent", testClaimLimitedConcurrent},
	{"ClaimLimitedRate", testClaimLimitedRate},
	{"ClaimLimitedBucketMath", testBucketMath},
	{"ClaimLimitedBadParams", testClaimLimitedBadParams},
	{"IdempotentHTTPLifecycle", testIdempotentHTTPLifecycle},
	{"IdempotentHTTPRelease", testIdempotentHTTPRelease},
	{"IdempotentHTTPExpiry", testIdempotentHTTPExpiry},
	{"IdempotentHTTPConcurrentBegin", testIdempotentHTTPConcurrentBegin},
	{"IdempotentHTTPBadParams", testIdempotentHTTPBadParams},
	{"BacklogPeaks", testBacklogPeaks},
	{"SourcesRejectedRoundTrip", testSourcesRejectedRoundTrip},
	{"SourcesRejectedDuplicate", testSourcesRejectedDuplicate},
	{"SourcesRejectedBadInputWritesNothing", testSourcesRejectedBadInput},
	{"SourcesRejectedConcurrent", testSourcesRejectedConcurrent},
	{"SourcesRejectedList", testSourcesRejectedList},
	{"SourcesRejectedResolveDelete", testSourcesRejectedResolveDelete},
	{"SourcesReport", testSourcesReport},
	{"SourcesReportPruned", testSourcesReportPruned},
	{"SourcesListOrder", testSourcesListOrder},
	{"FinishAgain", testFinishAgain},
	{"ClaimedReadBack", testClaimedReadBack},
}

func attemptError(attempt int, node string, start, end time.Time, msg string) *driver.AttemptError {
	return &driver.AttemptError{Attempt: attempt, Node: node, Start: start, End: end, Outcome: driver.OutcomeError, Error: msg}
}

func checkAttemptError(t *testing.T, got, want driver.AttemptError) {
	t.Helper()
	if got.Attempt != want.Attempt || got.Node != want.Node || got.Outcome != want.Outcome ||
		got.Error != want.Error || got.Stack != want.Stack || !got.Start.Equal(want.Start) || !got.End.Equal(want.End) {
		t.Fatalf("attempt error\n got %+v\nwant %+v", got, want)
	}
}

// everyTransition is one transition of each kind a worker sends for task
// id's attempt: drivers may write them by different statements (a batched
// success without result, say), and fencing must hold for each.
func everyTransition(id int64, attempt int, now time.Time) map[string]driver.Transition {
	ae := attemptError(attempt, "stale", now, now, "stale")
	return map[string]driver.Transition{
		"success":             {ID: id, Fence: int64(attempt), State: driver.StateSucceeded},
		"success with result": {ID: id, Fence: int64(attempt), State: driver.StateSucceeded, Result: []byte(`"stale"`)},
		"retry":               {ID: id, Fence: int64(attempt), State: driver.StatePending, RunAt: now, Error: ae},
		"release":             {ID: id, Fence: int64(attempt), State: driver.StatePending, RunAt: now, Refund: true},
		"dead":                {ID: id, Fence: int64(attempt), State: driver.StateDead, Error: ae},
	}
}

// requireRejected finishes each kind of transition as owner and fails the
// test if any applied.
func (e *env) requireRejected(owner string, now time.Time, ts map[string]driver.Transition) {
	e.t.Helper()
	for kind, tr := range ts {
		if got := e.finish(owner, now, tr); len(got) != 0 {
			e.t.Fatalf("%s by %s (fence %d) applied: fencing failed", kind, owner, tr.Fence)
		}
		if dber, ok := e.drv.(driver.DBer); ok && tr.Error == nil && !tr.Refund && tr.State == driver.StateSucceeded {
			tx, err := dber.DB().BeginTx(e.ctx, nil)
			if err != nil {
				e.t.Fatal(err)
			}
			ok, err := e.drv.FinishTx(e.ctx, tx, owner, now, tr)
			if cerr := tx.Commit(); err == nil {
				err = cerr
			}
			if err != nil || ok {
				e.t.Fatalf("%s by %s in FinishTx: applied %v, %v", kind, owner, ok, err)
			}
		}
	}
}
