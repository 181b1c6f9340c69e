package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/agentpen/agentpen/adapter/docker/dockerjson"
	"github.com/agentpen/agentpen/adapter/driver"
	"github.com/agentpen/agentpen/attest/evidence"
	"github.com/agentpen/agentpen/campaign"
	"golang.org/x/sync/errgroup"
)

// evidenceParallelism bounds the concurrent daemon calls of one
// attestation's evidence.
const evidenceParallelism = 32

// Evidence reads the daemon's own answers about a campaign, as the daemon
// wrote them, and decodes them (package dockerjson): /info, each
// journalled network and container by its id, the pinned images, and the
// lists of everything carrying the campaign's label and of every
// container carrying a uid-block label.
func (d *Driver) Evidence(ctx context.Context, q driver.EvidenceQuery) evidence.Runtime {
	return d.Capture(ctx, q).Decode(q.KeyEnv, q.KeyPolicy)
}

// Capture is Evidence before it is decoded: the daemon's JSON as it came
// (the attestation's test fixtures are captures).
func (d *Driver) Capture(ctx context.Context, q driver.EvidenceQuery) dockerjson.Capture {
	c := dockerjson.Capture{Endpoint: d.host.URL, Networks: map[string]dockerjson.Raw{}, Containers: map[string]dockerjson.Raw{}, Images: map[string]dockerjson.Raw{}}
	var mu sync.Mutex
	set := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(evidenceParallelism)
	label := url.Values{"filters": {`{"label":{"` + campaign.LabelCampaign + "=" + q.CampaignID + `":true}}`}}
	g.Go(func() error { r := d.rawGet(gctx, "/info", nil); set(func() { c.Info = r }); return nil })
	g.Go(func() error {
		r := d.rawGet(gctx, "/containers/json", url.Values{"all": {"1"}, "filters": label["filters"]})
		set(func() { c.ContainerList = r })
		return nil
	})
	g.Go(func() error {
		r := d.rawGet(gctx, "/networks", label)
		set(func() { c.NetworkList = r })
		return nil
	})
	g.Go(func() error {
		q := url.Values{"all": {"1"}, "filters": {`{"label":{"` + campaign.LabelUIDBlock + `":true}}`}}
		r := d.rawGet(gctx, "/containers/json", q)
		set(func() { c.UIDBlocks = r })
		return nil
	})
	for _, res := range q.Resources {
		if res.ID == "" || res.Removed {
			continue
		}
		switch res.Kind {
		case campaign.KindNetwork:
			g.Go(func() error {
				b, err := d.NetworkJSON(gctx, res.ID)
				r := toRaw(b, err)
				set(func() { c.Networks[res.ID] = r })
				return nil
			})
		case campaign.KindContainer:
			g.Go(func() error {
				b, err := d.ContainerJSON(gctx, res.ID)
				r := toRaw(b, err)
				set(func() { c.Containers[res.ID] = r })
				return nil
			})
		}
	}
	// The images the plan pins (a tag by the id its bring-up resolved it
	// to, never by what the tag names now), by the pinned reference.
	for _, ref := range q.Images {
		g.Go(func() error {
			r := d.rawGet(gctx, "/images/"+ref+"/json", nil)
			set(func() { c.Images[ref] = r })
			return nil
		})
	}
	g.Wait()
	return c
}

func toRaw(b []byte, err error) dockerjson.Raw {
	switch err := classify(err); {
	case err == nil:
		return dockerjson.Raw{JSON: b}
	case errors.Is(err, driver.ErrNotFound):
		return dockerjson.Raw{NotFound: true}
	default:
		return dockerjson.Raw{Err: err.Error()}
	}
}

// rawGet is a GET of the Engine API as the daemon answers it: the body of
// a 200, NotFound for a 404, the error otherwise.
func (d *Driver) rawGet(ctx context.Context, path string, q url.Values) dockerjson.Raw {
	u := "http://docker/v" + d.api.ClientVersion() + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return dockerjson.Raw{Err: err.Error()}
	}
	resp, err := d.api.HTTPClient().Do(req)
	if err != nil {
		return dockerjson.Raw{Err: fmt.Sprintf("GET %s: %v", path, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	switch {
	case err != nil:
		return dockerjson.Raw{Err: fmt.Sprintf("GET %s: %v", path, err)}
	case resp.StatusCode == http.StatusNotFound:
		return dockerjson.Raw{NotFound: true}
	case resp.StatusCode != http.StatusOK:
		return dockerjson.Raw{Err: fmt.Sprintf("GET %s: status %d: %s", path, resp.StatusCode, truncate(string(b), 200))}
	case !json.Valid(b):
		return dockerjson.Raw{Err: fmt.Sprintf("GET %s: the body is not JSON", path)}
	}
	return dockerjson.Raw{JSON: b}
}
