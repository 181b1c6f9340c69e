package campaign

import (
	"fmt"
	"strconv"
	"time"
)

// Bounds of a lifetime, in seconds.
const (
	MinTTLSeconds         = 10
	MaxTTLSeconds         = 30 * 24 * 3600
	MinIdleTimeoutSeconds = 5
	MaxIdleTimeoutSeconds = MaxTTLSeconds
	// A launcher timeout (launcher_timeout_seconds) is at least
	// MinLauncherTimeoutSeconds: a launcher reconnecting its event stream
	// after a dropped connection needs a moment.
	MinLauncherTimeoutSeconds = 5
	MaxLauncherTimeoutSeconds = MaxTTLSeconds
)

// Lifetime is how long a campaign may live: TTL counted from the moment
// its create was accepted, an idle timeout (no episode traffic, a reset
// or a step, for that long), and a launcher timeout (its launcher gone
// for that long: LauncherGone). A zero TTL, Idle or Launcher is none.
// Whoever serves or reconciles the state root enforces the first two
// (agentpen serve, agentpen reconcile): an expired campaign is removed as
// DELETE removes it, with ReasonTTL or ReasonIdle; only a running
// agentpen serve, which sees its launchers, enforces the third
// (ReasonLauncherGone).
type Lifetime struct {
	// Accepted is when the create was accepted.
	Accepted time.Time
	TTL      time.Duration
	Idle     time.Duration
	Launcher time.Duration
	// Set is when it was last set (its record's time: the bring-up's, or
	// an extension's); an idle timeout counts from no earlier.
	Set time.Time
}

// IsZero reports a lifetime with neither limit.
func (l Lifetime) IsZero() bool { return l.TTL <= 0 && l.Idle <= 0 && l.Launcher <= 0 }

// Expires is the TTL's deadline (zero for none).
func (l Lifetime) Expires() time.Time {
	if l.TTL <= 0 {
		return time.Time{}
	}
	return l.Accepted.Add(l.TTL)
}

// Record is the journal record that sets l for generation gen.
func (l Lifetime) Record(gen int) Record {
	return Record{Op: OpLifetime, Gen: gen, Accepted: l.Accepted.UTC(), TTL: int(l.TTL / time.Second), Idle: int(l.Idle / time.Second),
		Launcher: int(l.Launcher / time.Second)}
}

// LifetimeOf is the lifetime an OpLifetime record sets.
func LifetimeOf(r Record) Lifetime {
	return Lifetime{Accepted: r.Accepted, TTL: time.Duration(r.TTL) * time.Second, Idle: time.Duration(r.Idle) * time.Second,
		Launcher: time.Duration(r.Launcher) * time.Second, Set: r.Time}
}

// CheckLifetime validates a spec's (or an extension's) lifetime fields:
// 0 (none), or MinTTLSeconds..MaxTTLSeconds and
// MinIdleTimeoutSeconds..MaxIdleTimeoutSeconds.
func CheckLifetime(ttlField string, ttl int, idleField string, idle int) error {
	var errs errList
	if ttl != 0 && (ttl < MinTTLSeconds || ttl > MaxTTLSeconds) {
		errs.add(invalid(ttlField, strconv.Itoa(ttl), "must be 0 (none) or %d..%d seconds", MinTTLSeconds, MaxTTLSeconds))
	}
	if idle != 0 && (idle < MinIdleTimeoutSeconds || idle > MaxIdleTimeoutSeconds) {
		errs.add(invalid(idleField, strconv.Itoa(idle), "must be 0 (none) or %d..%d seconds", MinIdleTimeoutSeconds, MaxIdleTimeoutSeconds))
	}
	return errs.err()
}

// CheckLauncherTimeout validates a spec's (or an extension's)
// launcher_timeout_seconds: 0 (none), or
// MinLauncherTimeoutSeconds..MaxLauncherTimeoutSeconds.
func CheckLauncherTimeout(field string, n int) error {
	if n != 0 && (n < MinLauncherTimeoutSeconds || n > MaxLauncherTimeoutSeconds) {
		return invalid(field, strconv.Itoa(n), "must be 0 (none) or %d..%d seconds", MinLauncherTimeoutSeconds, MaxLauncherTimeoutSeconds)
	}
	return nil
}

// LifetimePolicy is the operator's: the lifetime a spec that asks for
// none gets, and the most one may ask for (zero: no default, no
// maximum). agentpen serve applies its flags' to every create and
// extension; agentpen up applies none.
type LifetimePolicy struct {
	DefaultTTL, MaxTTL   time.Duration
	DefaultIdle, MaxIdle time.Duration
}

// Apply gives a spec's lifetime (in seconds) the policy's defaults for
// what it leaves 0, and refuses what exceeds its maxima (Check).
func (pol LifetimePolicy) Apply(ttlField string, ttl int, idleField string, idle int) (time.Duration, time.Duration, error) {
	t, i := time.Duration(ttl)*time.Second, time.Duration(idle)*time.Second
	if t == 0 {
		t = pol.DefaultTTL
	}
	if i == 0 {
		i = pol.DefaultIdle
	}
	return t, i, pol.Check(ttlField, t, idleField, i)
}

// Check refuses a lifetime over the policy's maxima, naming the fields:
// more than a maximum, or none (0) where there is one.
func (pol LifetimePolicy) Check(ttlField string, ttl time.Duration, idleField string, idle time.Duration) error {
	var errs errList
	if pol.MaxTTL > 0 && (ttl <= 0 || ttl > pol.MaxTTL) {
		errs.add(invalid(ttlField, strconv.Itoa(int(ttl/time.Second)), "this service allows at most %d seconds (and no campaign without one)", int(pol.MaxTTL/time.Second)))
	}
	if pol.MaxIdle > 0 && (idle <= 0 || idle > pol.MaxIdle) {
		errs.add(invalid(idleField, strconv.Itoa(int(idle/time.Second)), "this service allows at most %d seconds (and no campaign without one)", int(pol.MaxIdle/time.Second)))
	}
	return errs.err()
}

// Due says whether a campaign that is up must be removed at now:
// ReasonTTL once its deadline passed, ReasonIdle once its idle timeout
// passed since it was last active (lastActive, its readiness or its
// lifetime's last change, the latest); "" otherwise, with next the
// moment to ask again (zero: never, a campaign with no lifetime or not
// up).
func (lc Lifecycle) Due(now, lastActive time.Time) (reason string, next time.Time) {
	if !lc.Status.Up() || lc.Lifetime.IsZero() {
		return "", time.Time{}
	}
	l := lc.Lifetime
	if exp := l.Expires(); !exp.IsZero() {
		if !now.Before(exp) {
			return ReasonTTL, time.Time{}
		}
		next = exp
	}
	if l.Idle > 0 {
		idleAt := latest(lastActive, lc.ReadyAt, l.Set).Add(l.Idle)
		if !now.Before(idleAt) {
			return ReasonIdle, time.Time{}
		}
		if next.IsZero() || idleAt.Before(next) {
			next = idleAt
		}
	}
	return "", next
}

// Expiry is a removal a campaign's lifetime will make: why (ReasonTTL,
// ReasonIdle) and when.
type Expiry struct {
	Reason   string
	Deadline time.Time
}

// Record is the OpExpiring record that warns of e for generation gen.
func (e Expiry) Record(gen int) Record {
	return Record{Op: OpExpiring, Gen: gen, Reason: e.Reason, Deadline: e.Deadline.UTC()}
}

// Warning says whether a warning of a coming removal (OpExpiring) is due
// at now for a campaign that is up with a lifetime: lead before its ttl
// or idle deadline (at most half the limit before it, so a short limit
// is not warned of from its start), once per deadline (a deadline the
// journal warned of already is not warned of again; an extension or an
// episode that moves it makes a new one). e is the removal with the
// earliest deadline whose warning is due; next is when to ask again
// (zero: never). lastActive is as for Due.
func (lc Lifecycle) Warning(now, lastActive time.Time, lead time.Duration) (e Expiry, due bool, next time.Time) {
	if !lc.Status.Up() || lc.Lifetime.IsZero() || lead <= 0 {
		return Expiry{}, false, time.Time{}
	}
	l := lc.Lifetime
	var candidates []Expiry
	var leads []time.Duration
	if exp := l.Expires(); !exp.IsZero() {
		candidates, leads = append(candidates, Expiry{ReasonTTL, exp}), append(leads, min(lead, l.TTL/2))
	}
	if l.Idle > 0 {
		idleAt := latest(lastActive, lc.ReadyAt, l.Set).Add(l.Idle)
		candidates, leads = append(candidates, Expiry{ReasonIdle, idleAt}), append(leads, min(lead, l.Idle/2))
	}
	for i, c := range candidates {
		warnAt := c.Deadline.Add(-leads[i])
		switch {
		case !now.Before(c.Deadline), lc.warned(c):
			// Due's to remove, or told already.
		case !now.Before(warnAt):
			if !due || c.Deadline.Before(e.Deadline) {
				e, due = c, true
			}
		case next.IsZero() || warnAt.Before(next):
			next = warnAt
		}
	}
	return e, due, next
}

// warned says whether the journal warned of e.
func (lc Lifecycle) warned(e Expiry) bool {
	for _, w := range lc.Warnings {
		if w.Reason == e.Reason && w.Deadline.Equal(e.Deadline) {
			return true
		}
	}
	return false
}

// LauncherGone says whether a campaign that is up and tied to its
// launcher (Lifetime.Launcher) must be removed at now, its launcher last
// seen at seen (the moment its last event stream of it closed, or its
// last keepalive; now while one is open) more than its launcher timeout
// ago; next is when to ask again (zero: never). A zero seen is never
// gone: only a service that watched the launcher knows when it was last
// seen.
func (lc Lifecycle) LauncherGone(now, seen time.Time) (gone bool, next time.Time) {
	if !lc.Status.Up() || lc.Lifetime.Launcher <= 0 || seen.IsZero() {
		return false, time.Time{}
	}
	at := seen.Add(lc.Lifetime.Launcher)
	if !now.Before(at) {
		return true, time.Time{}
	}
	return false, at
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// ReconcileReason is why reconciling removes the campaign at now (""
// leaves it): a bring-up that never finished (StatusStartingOrFailed,
// whose process is gone: its caller holds the campaign's lock) is rolled
// back (ReasonRollback); a removal that did not finish or was not
// verified (StatusCleanupFailed) is finished with the reason it began
// with; a campaign that is up and Due is removed for that reason.
func (lc Lifecycle) ReconcileReason(now, lastActive time.Time) string {
	switch lc.Status {
	case StatusStartingOrFailed:
		return ReasonRollback
	case StatusCleanupFailed:
		switch {
		case lc.LastRemoval != "":
			return lc.LastRemoval
		case !lc.Ready:
			return ReasonRollback
		}
		return ReasonReconcile
	case StatusReady, StatusAttestationFailed:
		reason, _ := lc.Due(now, lastActive)
		return reason
	}
	return ""
}

// String describes l for a person ("ttl 3600 s (until ...), idle timeout
// 600 s").
func (l Lifetime) String() string {
	if l.IsZero() {
		return "none"
	}
	s := ""
	if l.TTL > 0 {
		s = fmt.Sprintf("ttl %d s (until %s)", int(l.TTL/time.Second), l.Expires().UTC().Format(time.RFC3339))
	}
	if l.Idle > 0 {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("idle timeout %d s", int(l.Idle/time.Second))
	}
	if l.Launcher > 0 {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("launcher timeout %d s", int(l.Launcher/time.Second))
	}
	return s
}
