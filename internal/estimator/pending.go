package estimator

import "context"

// EstimatePending is Estimate for the tasks of ts that are not nil, in
// ts's order; the ETA of a nil task is nil. It reads nothing when every
// task is nil.
func (e *Estimator) EstimatePending(ctx context.Context, ts []*Task) ([]*ETA, error) {
	out := make([]*ETA, len(ts))
	var at []int // where each task estimated is in ts
	var tasks []Task
	for i, t := range ts {
		if t != nil {
			at = append(at, i)
			tasks = append(tasks, *t)
		}
	}
	if len(tasks) == 0 {
		return out, nil
	}
	es, err := e.Estimate(ctx, tasks)
	if err != nil {
		return nil, err
	}
	for j := range es {
		out[at[j]] = &es[j]
	}
	return out, nil
}
