//go:build scale

package scale

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/death"
)

func formatFloat(f float64, prec int) string { return strconv.FormatFloat(f, 'f', prec, 64) }

// score is how runnerguard did against the deaths the simulator caused.
type score struct {
	runners, once, missed, duplicates, wrongClass int
	wrong                                         []string
	// latencies of the deaths while a replica led, and of those while
	// the leader was down (they wait for the next one).
	latencies, gapLatencies []time.Duration
}

// scoreRunners compares each runner's records with the death it had.
func scoreRunners(o *observer, rs []*runner, gap map[*runner]bool) score {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := score{}
	for _, r := range rs {
		recs := o.records[r.uid]
		want := r.deaths()
		s.runners += want
		s.once += min(len(recs), want)
		s.missed += max(0, want-len(recs))
		s.duplicates += max(0, len(recs)-want)
		if len(recs) == 0 {
			continue
		}
		// The job's end is the runner's last death: its record is the last
		// to arrive; a restart's record says cgroup-oom.
		last := recs[len(recs)-1]
		classes := map[string]bool{}
		for _, rec := range recs {
			classes[rec.class] = true
		}
		if !classes[string(r.want())] || (r.restarts && !classes[string(death.CgroupOOM)]) {
			s.wrongClass++
			if len(s.wrong) < 5 {
				s.wrong = append(s.wrong, fmt.Sprintf("%s/%s: %s (deleted by %q, rule %q), want %s; removed %s after its deletion was seen",
					r.ns, r.name, last.class, last.deletedBy, last.rule, r.want(), o.removed[r.uid].Sub(o.deleting[r.uid]).Round(time.Millisecond)))
			}
		}
		recs = []seenRecord{last}
		if died, ok := o.died[r.uid]; ok && gap[r] {
			s.gapLatencies = append(s.gapLatencies, recs[0].at.Sub(died))
		} else if ok {
			s.latencies = append(s.latencies, recs[0].at.Sub(died))
		}
	}
	for _, l := range [][]time.Duration{s.latencies, s.gapLatencies} {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	}
	return s
}

// pct is the q-quantile of sorted durations.
func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[int(q*float64(len(d)-1))].Round(time.Millisecond)
}

// chaos counts what the reaper and the drain were answered.
type chaos struct {
	reaperTried, reaperRefused, drainTried, drainRefused429, busyLost int
	ownerTried, ownerAllowed, overrideTried, overrideAllowed          int
	// overrideRetries: the 429s the deliberate drain was answered after
	// the override, before the leader released the pods from the budget.
	overrideRetries int
}

// run is everything the report prints.
type run struct {
	mu                   sync.Mutex
	runners, nodes       int
	burst                time.Duration
	before, burstEnd     snapshot
	preKill, postRestart snapshot
	end                  snapshot
	killed               int
	gap                  time.Duration
	gapDeaths            int
	requests, burstReqs  map[string]int
	// byKind: the requests that name one runner's pod, by what happened
	// to the runner (the per-job cost of each kind of job).
	byKind map[string]kindCost
	// budgetCreates counts runnerguard's budget creates by namespace;
	// budgetDeletes, its budget deletes.
	budgetCreates map[string]int
	budgetDeletes int
	chaos         chaos
	score         score
	obs           *observer
	// Runners that never started, removed by the reaper: the guard calls
	// and the records they caused (both must be 0).
	neverStarted, neverCalls, neverRecords int
	// Runners restarted in place once before their job's end.
	restarted int
	// Round trips the simulator timed: pod CREATEs of the burst, refused
	// deletes and evictions, and GitLab's allowed job-end deletes.
	createRTT, allowedRTT []time.Duration
	// The reaper's refused force-deletes and the drain's refused
	// evictions of busy runners (the baseline's succeed: no guard, no
	// budget), and the deliberate drain's evictions after the override.
	deleteRTT, evictRTT, overrideRTT []time.Duration
	// stalled: GitLab build pods stalled before their OOM kill; reports:
	// what the destinations received.
	stalled, stalledNow int
	reports             reportCounts
	// rs: the plan's runners.
	rs []*runner
	// The kill paths of kills_test.go.
	kills *kills
	// base: the same simulation without runnerguard; cp: the control
	// plane at the burst's start, all running, the end; others: the
	// cluster's other pods.
	base   *run
	cp     [3]cpSnap
	others others
}

func (r *run) report() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	jobs := float64(r.runners)
	p("== Fleet scale: %d runner pods on %d kwok nodes, runnerguard as 2 replicas ==", r.runners, r.nodes)
	p("burst: %d pods created in %s (%.0f/s)", r.runners, r.burst, jobs/r.burst.Seconds())
	inj := webhookWindow(r.before, r.burstEnd, registration.InjectPath)
	refusals := webhookWindow(r.burstEnd, r.preKill, registration.GuardPath)
	allowed := webhookWindow(r.postRestart, r.end, registration.GuardPath)
	// controller-runtime's histogram buckets are a decade wide (0.1, 1,
	// 10, 100 ms, 1 s): an estimate within one would be a guess, so the
	// report names the bucket; the round trips below are exact.
	p("in process, injector during the burst: %.0f reviews, p50 %s, p99 %s", inj.count(), within(inj, .5), within(inj, .99))
	p("in process, guard, reaper and drain:   %.0f reviews, p50 %s, p99 %s (refusals: a Warning Event each)", refusals.count(), within(refusals, .5), within(refusals, .99))
	p("in process, guard, job ends and drain: %.0f reviews, p50 %s, p99 %s (allowed: a deletion note each)", allowed.count(), within(allowed, .5), within(allowed, .99))
	for _, l := range []struct {
		what string
		d    []time.Duration
	}{{"pod CREATE (the burst)", r.createRTT}, {"refused DELETE (reaper)", r.deleteRTT}, {"refused eviction (drain)", r.evictRTT},
		{"eviction after override", r.overrideRTT}, {"GitLab job-end DELETE", r.allowedRTT}} {
		sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
		p("round trip, %-24s %5d requests, p50 %s, p99 %s (the simulator's clock)", l.what, len(l.d), pct(l.d, .5), pct(l.d, .99))
	}
	p("")
	p("replica usage (RSS now and the anonymous part of it, peak VmHWM, CPU seconds since the process started; the killed replica restarts as follower):")
	row := func(when string, s snapshot) {
		for i := range 2 {
			role := "follower"
			if s.leader == i {
				role = "leader"
			}
			if s.usage[i].RSS == 0 {
				continue
			}
			p("  %-22s replica %d %-8s RSS %6.1f MiB (anon %5.1f)  peak %6.1f MiB  CPU %6.2f s", when, i+1, role,
				mib(s.usage[i].RSS), mib(s.usage[i].Anon), mib(s.usage[i].HWM), s.usage[i].CPU)
		}
	}
	row("all running", r.burstEnd)
	row("before the leader kill", r.preKill)
	row("end", r.end)
	p("")
	total := 0
	for _, n := range r.requests {
		total += n
	}
	p("API requests by runnerguard (audit log, its user only), whole run: %d = %.2f per job", total, float64(total)/jobs)
	for _, k := range sortedKeys(r.requests) {
		p("  %-40s %6d  %.2f/job", k, r.requests[k], float64(r.requests[k])/jobs)
	}
	bt := 0
	for _, n := range r.burstReqs {
		bt += n
	}
	p("  of which during the create burst: %d", bt)
	events := r.requests["create events"] + r.requests["patch events"]
	p("Events written: %d (%.2f per job); records: %d (%.2f per job)", events, float64(events)/jobs,
		r.requests["create runnerdeaths"], float64(r.requests["create runnerdeaths"])/jobs)
	p("requests naming one runner's pod (its Events, records, deletion note, pod reads and patches), by what happened to it:")
	b.WriteString(formatKinds(r.byKind))
	p("")
	c := r.chaos
	p("reaper force-deletes of busy runners: %d, refused %d; drain evictions of busy runners: %d, answered 429: %d; busy runners lost: %d",
		c.reaperTried, c.reaperRefused, c.drainTried, c.drainRefused429, c.busyLost)
	p("GitLab manager job-end deletes: %d, allowed %d; deliberate drain (override) evictions: %d, allowed %d, after %d 429s retried a second apart (the budget's hold released after the override)",
		c.ownerTried, c.ownerAllowed, c.overrideTried, c.overrideAllowed, c.overrideRetries)
	p("never-started runners removed by the reaper: %d, guard calls %d, records %d", r.neverStarted, r.neverCalls, r.neverRecords)
	if r.obs != nil {
		on, off, held, released := r.obs.markDelays(r.rs)
		p("marks and budget label: %d runners held, %d released; job start (pod seen running) -> held: p50 %s, p99 %s; death seen -> released: %d, p50 %s, p99 %s",
			held, released, pct(on, .5), pct(on, .99), len(off), pct(off, .5), pct(off, .99))
	}
	rc := r.reports
	p("stalls: %d GitLab build pods stalled at their limit, each counted by the leader before its OOM kill (its gauge of pods stalled then: %d); GitLab running statuses (stalls told) %d", r.stalled, r.stalledNow, rc.stallsTold)
	p("reports: GitLab failed statuses %d of %d OOM-killed build pods (%d statuses in all, %d refused); sink events %d for %d told deaths of the plan (%d refused)",
		rc.glFailed, rc.glWant, rc.glStatuses, rc.glErrors, rc.sinkEvents, rc.sinkWant, rc.sinkErrors)
	p("leader kill: replica %d killed; %d runners died while it was down; new leader after %s", r.killed+1, r.gapDeaths, r.gap)
	s := r.score
	var slow []time.Duration
	r.obs.mu.Lock()
	moved := 0
	for uid, at := range r.obs.removed {
		slow = append(slow, at.Sub(r.obs.deleting[uid]))
		if !r.obs.startLast[uid].Equal(r.obs.startFirst[uid]) {
			moved++
		}
	}
	r.obs.mu.Unlock()
	sort.Slice(slow, func(i, j int) bool { return slow[i] < slow[j] })
	p("deleted pods: %d, deletion seen -> pod removed by kwok: p50 %s, p99 %s, max %s; deletion start (deletionTimestamp - grace) moved by the final delete: %d",
		len(slow), pct(slow, .5), pct(slow, .99), pct(slow, 1), moved)
	p("runners restarted in place once (137 OOMKilled) before their end: %d (two deaths each)", r.restarted)
	p("deaths: %d, recorded exactly once %d, missed %d, duplicates %d, wrong class %d %v", s.runners, s.once, s.missed, s.duplicates, s.wrongClass, s.wrong)
	p("record latency (death seen by a watch -> record seen by a watch): p50 %s, p99 %s, max %s; of the %d deaths while the leader was down: p50 %s, max %s",
		pct(s.latencies, .5), pct(s.latencies, .99), pct(s.latencies, 1), len(s.gapLatencies), pct(s.gapLatencies, .5), pct(s.gapLatencies, 1))
	if r.kills != nil {
		r.kills.report(p)
	}
	return b.String()
}
