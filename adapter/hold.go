package adapter

import (
	"context"
	"errors"
	"sync"

	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/store"
)

// A campaign's lock (store.Locks.Campaign, one per campaign on the
// runtime, which every agentpen on it shares) guards its journal: every
// record is appended, and every decision on the state it reads is taken,
// under it. Most operations take it alone (lockCampaign): a bring-up, an
// attestation, a removal, a lifetime, a reconciliation, a cold claim.
//
// A batch of warm claims and a refill's holds share it within this
// process (shareHold, issue 41): the first takes the lock and opens the
// journal, the others join while it is held, and the last to leave
// closes the journal and releases the lock. They append through the one
// open journal (safe for concurrent use: the chain is kept), and their
// decisions do not touch each other's: a claim binds a ready slot and
// journals it, a refill journals and makes new slots (not ready until
// attested: no claim takes them) and the verdict on its own slots. So a
// claim does not wait for a refill's daemon calls. The one decision they
// share is whether the campaign is ready: a failed verdict ends that, so
// a claim batch reads the state again, and journals its claims, in turn
// with the verdicts (decideTurn). Refills take turns
// among themselves (refillMu: each picks the next slot numbers from the
// journal). Once a taker of the lock alone waits in this process, no one
// joins the shared hold: it ends, the lock goes to that taker, and the
// sharers after it share a hold of their own.

// campaignHolds is this process's state of one campaign's lock.
type campaignHolds struct {
	// alone counts the takers of the lock alone waiting for it.
	alone int
	// shared is the hold new sharers join (nil: none).
	shared *sharedHold
	// refillMu makes a refill's holds take turns with another refill's.
	refillMu sync.Mutex
	// decideMu is held by a sharer of the hold from the reading of the
	// state it decides on to the append of what it decided, where the
	// other's records could change that state: a claim batch's claims and
	// a refill's verdict (a failed one fails the campaign closed).
	decideMu sync.Mutex
}

// sharedHold is one hold of a campaign's lock shared by this process's
// claim batches and refill holds.
type sharedHold struct {
	// ready is closed once lock and j are open, or err says why not.
	ready chan struct{}
	err   error
	lock  *store.Lock
	j     *campaign.Journal
	// users is guarded by Adapter.holdsMu.
	users int
}

// holdsOf returns key's state, made when missing; holdsMu is held.
func (a *Adapter) holdsOfLocked(key string) *campaignHolds {
	if a.holds == nil {
		a.holds = map[string]*campaignHolds{}
	}
	h := a.holds[key]
	if h == nil {
		h = &campaignHolds{}
		a.holds[key] = h
	}
	return h
}

// refillTurn is the mutex a campaign's refills take turns on.
func (a *Adapter) refillTurn(key string) *sync.Mutex {
	a.holdsMu.Lock()
	defer a.holdsMu.Unlock()
	return &a.holdsOfLocked(key).refillMu
}

// decideTurn is the mutex a campaign's claim batches and refill
// verdicts decide and journal under (campaignHolds.decideMu).
func (a *Adapter) decideTurn(key string) *sync.Mutex {
	a.holdsMu.Lock()
	defer a.holdsMu.Unlock()
	return &a.holdsOfLocked(key).decideMu
}

// takeAlone runs take, which takes the campaign's lock alone, counted as
// a taker waiting for it: no one joins the shared hold meanwhile.
func (a *Adapter) takeAlone(key string, take func() (*store.Lock, error)) (*store.Lock, error) {
	a.holdsMu.Lock()
	a.holdsOfLocked(key).alone++
	a.holdsMu.Unlock()
	defer func() {
		a.holdsMu.Lock()
		a.holds[key].alone--
		a.holdsMu.Unlock()
	}()
	return take()
}

// shareHold joins the shared hold of c's lock, or takes the lock and
// opens its journal for one when there is none to join (or a taker of
// the lock alone waits). The caller leaves with leaveHold.
func (a *Adapter) shareHold(ctx context.Context, c *store.Campaign) (*sharedHold, error) {
	for {
		a.holdsMu.Lock()
		hs := a.holdsOfLocked(c.Key)
		h := hs.shared
		opener := h == nil || hs.alone > 0
		if opener {
			h = &sharedHold{ready: make(chan struct{})}
			hs.shared = h
		}
		h.users++
		a.holdsMu.Unlock()
		if opener {
			a.openHold(ctx, c, h)
		} else {
			select {
			case <-h.ready:
			case <-ctx.Done():
				a.leaveHold(c.Key, h)
				return nil, ctx.Err()
			}
		}
		if h.err == nil {
			return h, nil
		}
		a.leaveHold(c.Key, h)
		if err := ctx.Err(); err != nil || (!errors.Is(h.err, context.Canceled) && !errors.Is(h.err, context.DeadlineExceeded)) {
			return nil, h.err
		}
		// Its opener's request ended while it waited for the lock: this
		// one opens the next.
	}
}

// openHold takes c's lock for h and opens its journal (or fails h).
func (a *Adapter) openHold(ctx context.Context, c *store.Campaign, h *sharedHold) {
	l, err := a.locks()
	if err == nil {
		h.lock, err = l.Campaign(ctx, c.Key, store.DefaultLockWait)
	}
	if err == nil {
		if h.j, err = a.openJournal(c); err != nil {
			h.lock.Unlock()
			h.lock = nil
		}
	}
	if err != nil {
		h.err = err
		a.holdsMu.Lock()
		if hs := a.holds[c.Key]; hs.shared == h {
			hs.shared = nil
		}
		a.holdsMu.Unlock()
	}
	close(h.ready)
}

// leaveHold leaves h; the last to leave closes its journal and releases
// the lock.
func (a *Adapter) leaveHold(key string, h *sharedHold) {
	a.holdsMu.Lock()
	h.users--
	last := h.users == 0
	if hs := a.holds[key]; last && hs.shared == h {
		hs.shared = nil
	}
	a.holdsMu.Unlock()
	if last && h.err == nil {
		h.j.Close()
		h.lock.Unlock()
	}
}
