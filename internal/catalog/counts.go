package catalog

import "github.com/keelq/keel/driver"

// QueueCounts folds live counter rows into the tasks of each queue by
// state (keel.Client.Counts), leaving out the rows skip names (keel's own
// tasks).
func QueueCounts(rows []driver.CountRow, skip func(queue, taskType string) bool) map[string]map[driver.State]int64 {
	out := map[string]map[driver.State]int64{}
	for _, r := range rows {
		if skip(r.Queue, r.Type) {
			continue
		}
		if out[r.Queue] == nil {
			out[r.Queue] = map[driver.State]int64{}
		}
		out[r.Queue][state(r.Kind)] += r.N
	}
	return out
}
