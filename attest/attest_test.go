package attest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/agentpen/agentpen/adapter/docker/dockerjson"

	"github.com/agentpen/agentpen/apikey"
	"github.com/agentpen/agentpen/campaign"
	"github.com/agentpen/agentpen/workbench/probe/wire"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/attest")

// TestGoodFixturesAttest: each captured campaign attests ok, and its
// report equals the golden one (regenerate with go test ./attest -update).
func TestGoodFixturesAttest(t *testing.T) {
	for _, name := range append(fixtureNames, clusterFixture) {
		t.Run(name, func(t *testing.T) {
			f := loadFixture(t, name)
			rep := Evaluate(f.src, f.observed())
			if !rep.OK || len(rep.FailedChecks) != 0 {
				t.Fatalf("a good campaign does not attest: %v", rep.FailureLines())
			}
			got, err := rep.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("..", "testdata", "attest", name, "report.golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (generate it with go test ./attest -update)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Fatalf("report differs from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// mutation is one row of the table: a one-field change of a good fixture
// and exactly the checks it must fail.
type mutation struct {
	name    string
	fixture string // "internal" (default) or "nat"
	what    string // the change, in words
	mutate  func(t *testing.T, f *fixture)
	want    []string
}

const (
	srv = "server"
	ws0 = "workspaces[0]"
	ws2 = "workspaces[2]" // a launcher's own command (the network canaries)
)

func mutations() []mutation {
	otherID := strings.Repeat("f", 64)
	ms := []mutation{
		// Daemon identity.
		{name: "daemon_id", what: "/info ID is another daemon's", want: []string{"daemon.id"},
			mutate: func(t *testing.T, f *fixture) { f.info(t, func(m map[string]any) { m["ID"] = "OTHR:DAEM:ON00" }) }},
		{name: "daemon_version", what: "/info ServerVersion changed", want: []string{"daemon.version"},
			mutate: func(t *testing.T, f *fixture) { f.info(t, func(m map[string]any) { m["ServerVersion"] = "24.0.7" }) }},
		{name: "daemon_not_rootless", what: "/info SecurityOptions without name=rootless", want: []string{"daemon.rootless"},
			mutate: func(t *testing.T, f *fixture) {
				f.info(t, func(m map[string]any) { m["SecurityOptions"] = []any{"name=seccomp,profile=default"} })
			}},
		{name: "daemon_endpoint", what: "the selected socket is another one than the one observed and recorded", want: []string{"daemon.endpoint"},
			mutate: func(t *testing.T, f *fixture) { f.src.Endpoint = "unix:///run/user/4242/docker.sock" }},
		{name: "daemon_root_dir", what: "/info DockerRootDir is the rootful default", want: []string{"daemon.root_dir"},
			mutate: func(t *testing.T, f *fixture) {
				f.info(t, func(m map[string]any) { m["DockerRootDir"] = "/var/lib/docker" })
			}},
		{name: "daemon_info_unread", what: "/info could not be read", want: []string{"daemon.info"},
			mutate: func(t *testing.T, f *fixture) { f.raw.Info = dockerjson.Raw{Err: "connection reset"} }},
		// No network at all (the internal fixture's topology).
		{name: "network_in_no_network_campaign", what: "the journal of a campaign without networks records one", want: []string{"network.topology"},
			mutate: func(t *testing.T, f *fixture) {
				f.src.Records = append(f.src.Records,
					campaign.Record{Op: campaign.OpIntent, Gen: 1, Kind: campaign.KindNetwork, Name: "agentpen-stray"},
					campaign.Record{Op: campaign.OpCreated, Gen: 1, Kind: campaign.KindNetwork, Name: "agentpen-stray", ID: otherID})
			}},
		// The agent networks (the nat fixture's topology: one per agent).
		{name: "network_absent", fixture: "nat", what: "an agent network's inspect answers 404", want: []string{"networks[0].present"},
			mutate: func(t *testing.T, f *fixture) { f.raw.Networks[f.exp.Networks[0].ID] = dockerjson.Raw{NotFound: true} }},
		{name: "network_id", fixture: "nat", what: "network Id is another", want: []string{"networks[0].id"},
			mutate: func(t *testing.T, f *fixture) { f.network(t, func(m map[string]any) { m["Id"] = otherID }) }},
		{name: "network_name", fixture: "nat", what: "network Name is another", want: []string{"networks[0].name"},
			mutate: func(t *testing.T, f *fixture) { f.network(t, func(m map[string]any) { m["Name"] = "agentpen-other" }) }},
		{name: "network_driver", fixture: "nat", what: "network Driver macvlan", want: []string{"networks[0].driver"},
			mutate: func(t *testing.T, f *fixture) { f.network(t, func(m map[string]any) { m["Driver"] = "macvlan" }) }},
		{name: "network_internal_under_nat", fixture: "nat", what: "network Internal true under egress nat", want: []string{"networks[0].internal"},
			mutate: func(t *testing.T, f *fixture) { f.network(t, func(m map[string]any) { m["Internal"] = true }) }},
		{name: "network_stranger_member", fixture: "nat", what: "a container the journal does not know is on an agent network", want: []string{"networks[0].members"},
			mutate: func(t *testing.T, f *fixture) {
				f.network(t, func(m map[string]any) { at(m, "Containers")[otherID] = map[string]any{"Name": "intruder"} })
			}},
		{name: "network_other_agent_member", fixture: "nat", what: "another agent's workspace is on an agent network", want: []string{"networks[0].members"},
			mutate: func(t *testing.T, f *fixture) {
				f.network(t, func(m map[string]any) {
					at(m, "Containers")[f.id(t, "workspaces[1]")] = map[string]any{"Name": "other-agent"}
				})
			}},
		// Containers: identity.
		{name: "server_absent", what: "the server's inspect answers 404", want: []string{"server.present"},
			mutate: func(t *testing.T, f *fixture) { f.raw.Containers[f.id(t, srv)] = dockerjson.Raw{NotFound: true} }},
		{name: "workspace_unreadable", what: "a workspace's inspect failed (500)", want: []string{ws0 + ".present"},
			mutate: func(t *testing.T, f *fixture) { f.raw.Containers[f.id(t, ws0)] = dockerjson.Raw{Err: "status 500"} }},
		{name: "workspace_intent_unlabelled", what: "the journal's intent carries no io.agentpen labels", want: []string{ws0 + ".labels", ws0 + ".uid_block", ws0 + ".probe.uid_block", "isolation.uid_blocks_disjoint"},
			mutate: func(t *testing.T, f *fixture) {
				f.intent(t, ws0, func(map[string]string) map[string]string { return map[string]string{"team": "x"} })
			}},
		{name: "workspace_no_pid", what: "State.Pid 0", want: []string{ws0 + ".running"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) { at(m, "State")["Pid"] = 0 })
			}},
		{name: "workspace_image", what: "the workspace runs another image than the one pinned", want: []string{ws0 + ".image"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) { m["Image"] = "sha256:" + strings.Repeat("e", 64) })
			}},
		{name: "server_image", what: "the server runs another image than the one pinned", want: []string{"server.image"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, srv, func(m map[string]any) { m["Image"] = "sha256:" + strings.Repeat("e", 64) })
			}},
		// Containers: network.
		{name: "workspace_dns", what: "HostConfig.Dns set", want: []string{ws0 + ".dns"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) { at(m, "HostConfig")["Dns"] = []any{"8.8.8.8"} })
			}},
		{name: "server_extra_hosts", what: "HostConfig.ExtraHosts host-gateway", want: []string{"server.dns"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, srv, func(m map[string]any) { at(m, "HostConfig")["ExtraHosts"] = []any{"host.docker.internal:host-gateway"} })
			}},
		// The Docker socket.
		{name: "workspace_socket_mount", what: "the daemon socket bind-mounted into a workspace", want: []string{ws0 + ".docker_socket"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) {
					m["Mounts"] = append(m["Mounts"].([]any), map[string]any{"Type": "bind", "Source": f.src.SocketPath, "Destination": "/var/run/docker.sock", "RW": true})
				})
			}},
		{name: "workspace_runtime_dir_mount", what: "the daemon user's runtime directory (holding the socket) mounted into a workspace", want: []string{ws0 + ".docker_socket"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) {
					m["Mounts"] = append(m["Mounts"].([]any), map[string]any{"Type": "bind", "Source": filepath.Dir(f.src.SocketPath), "Destination": "/mnt/run", "RW": false})
				})
			}},
		{name: "server_docker_host_env", what: "DOCKER_HOST in the server's environment, no socket asked for", want: []string{"server.docker_socket"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, srv, func(m map[string]any) {
					cfg := at(m, "Config")
					cfg["Env"] = append(cfg["Env"].([]any), "DOCKER_HOST=tcp://10.0.0.1:2375")
				})
			}},
		{name: "server_socket_missing", fixture: "nat", what: "the socket the plan asks for is not mounted in the server", want: []string{"server.docker_socket"},
			mutate: func(t *testing.T, f *fixture) { f.container(t, srv, func(m map[string]any) { m["Mounts"] = []any{} }) }},
		// Publish.
		{name: "server_published_wildcard", what: "the server publishes 8080 on 0.0.0.0", want: []string{"server.publish"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, srv, func(m map[string]any) {
					at(m, "HostConfig")["PortBindings"] = map[string]any{"8080/tcp": []any{map[string]any{"HostIp": "0.0.0.0", "HostPort": "8080"}}}
				})
			}},
		{name: "nat_publish_not_loopback", fixture: "nat", what: "the planned loopback binding is active on 0.0.0.0", want: []string{"server.publish"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, srv, func(m map[string]any) {
					for _, bs := range at(m, "NetworkSettings", "Ports") {
						for _, b := range bs.([]any) {
							b.(map[string]any)["HostIp"] = "0.0.0.0"
						}
					}
				})
			}},
		{name: "workspace_publish_all", what: "PublishAllPorts true", want: []string{ws0 + ".publish"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) { at(m, "HostConfig")["PublishAllPorts"] = true })
			}},
		// Hardening.
		{name: "server_caps_not_dropped", what: "CapDrop empty", want: []string{"server.caps"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, srv, func(m map[string]any) { at(m, "HostConfig")["CapDrop"] = nil })
			}},
		// Limits.
		{name: "workspace_memory_not_recorded", what: "HostConfig.Memory 0 (2 GiB requested)", want: []string{ws0 + ".limits"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) { at(m, "HostConfig")["Memory"] = 0 })
			}},
		{name: "server_pids_limit", what: "HostConfig.PidsLimit 10 (none requested)", want: []string{"server.limits"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, srv, func(m map[string]any) { at(m, "HostConfig")["PidsLimit"] = 10 })
			}},
		// The API key.
		{name: "key_public_default", what: "the key policy lists the server key's fingerprint as a public default", want: []string{"api_key"},
			mutate: func(t *testing.T, f *fixture) {
				f.src.KeyPolicy.PublicDefaults = append(f.src.KeyPolicy.PublicDefaults, f.src.AgentpenKey.Fingerprint)
			}},
		{name: "key_short", what: "the server's key is shorter than the policy's minimum", want: []string{"api_key"},
			mutate: func(t *testing.T, f *fixture) { f.src.KeyPolicy.MinLength = 64 }},
		{name: "key_not_agentpens", what: "agentpen's environment holds another key than the server", want: []string{"api_key"},
			mutate: func(t *testing.T, f *fixture) {
				f.src.AgentpenKey = apikey.Default().Check("another-key-entirely-0001")
			}},
		{name: "workspace_other_key", what: "a workspace holds another key than the server", want: []string{ws0 + ".api_key"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) {
					env := at(m, "Config")["Env"].([]any)
					for i, kv := range env {
						if strings.HasPrefix(kv.(string), campaign.DefaultAPIKeyEnv+"=") {
							env[i] = campaign.DefaultAPIKeyEnv + "=another-key-entirely-0001"
						}
					}
				})
			}},
		// Custody.
		{name: "server_process_argv", what: "the process serving the server's port runs another argv", want: []string{"server.process"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseBefore, srv, "server/process/0", func(m map[string]any) { at(m, "process")["argv_digest"] = "sha256:" + strings.Repeat("0", 64) })
			}},
		{name: "workspace_process_extra_cap", what: "the workspace's serving process has CAP_NET_RAW in its bounding set", want: []string{ws0 + ".process"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/process/0", func(m map[string]any) { at(m, "process")["cap_bnd"] = "00000000000020e1" })
			}},
		{name: "workspace_process_missing", what: "nothing listens on the workbench socket", want: []string{ws0 + ".process"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/process/0", func(m map[string]any) { m["outcome"] = "not_found"; delete(m, "process") })
			}},
		// Connectivity.
		{name: "control_failed", what: "the positive control timed out (the negative probes of that exec are then no evidence)",
			want: []string{ws0 + ".probe.control", ws0 + ".probe.host_addresses", ws0 + ".probe.host_loopback"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/control/0", func(m map[string]any) { m["outcome"] = "timeout" })
			}},
		{name: "grader_health_down", what: "grader /health answers 503", want: []string{ws0 + ".probe.grader_health"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/grader_health/0", func(m map[string]any) { m["status"] = 503 })
			}},
		{name: "grader_route_open", what: "a protected route answers 200 without the key", want: []string{ws0 + ".probe.grader_protected"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/grader_protected/1", func(m map[string]any) { m["status"] = 200 })
			}},
		{name: "host_loopback_reached", what: "the host loopback listener connected", want: []string{ws0 + ".probe.host_loopback"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/host_loopback/0", func(m map[string]any) { m["outcome"] = "connected" })
			}},
		{name: "host_address_reached", what: "a host address listener connected under internal egress", want: []string{ws0 + ".probe.host_addresses"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/host_addresses/0", func(m map[string]any) { m["outcome"] = "connected" })
			}},
		{name: "host_probe_error", what: "a host probe ended in an unclassified error (no evidence)", want: []string{ws0 + ".probe.host_loopback"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/host_loopback/0", func(m map[string]any) { m["outcome"] = "error" })
			}},
		{name: "egress_blocked_under_nat", fixture: "nat", what: "the egress target timed out under egress nat", want: []string{ws0 + ".probe.egress"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/egress/0", func(m map[string]any) { m["outcome"] = "timeout" })
			}},
		{name: "workspace_sees_socket", what: "the socket probe found a socket at /var/run/docker.sock", want: []string{ws0 + ".probe.docker_socket"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/docker_socket/0", func(m map[string]any) {
					m["sockets"] = []any{map[string]any{"path": "/var/run/docker.sock", "how": "known_path", "is_socket": true}}
				})
			}},
		{name: "server_sees_socket", what: "the server's socket probe found a socket (none asked for)", want: []string{"server.probe.docker_socket"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseBefore, srv, "server/docker_socket/0", func(m map[string]any) {
					m["sockets"] = []any{map[string]any{"path": "/run/user/1001/docker.sock", "how": "glob", "is_socket": true}}
				})
			}},
		{name: "server_socket_not_visible", fixture: "nat", what: "the socket asked for is not visible in the server", want: []string{"server.probe.docker_socket"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseBefore, srv, "server/docker_socket/0", func(m map[string]any) { m["sockets"] = []any{} })
			}},
		{name: "counters_unread", what: "the counters could not be read after the probes (side effects are then unproven)",
			want: []string{"server.grader_counters", "server.grader_side_effects"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseAfter, srv, "server/counters_after/0", func(m map[string]any) { m["status"] = 500 })
			}},
		{name: "side_effect", what: "a request without the key reached the /v1/score handler", want: []string{"server.grader_side_effects"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseAfter, srv, "server/counters_after/0", func(m map[string]any) {
					body := m["body"].(map[string]any)
					r := at(body, "routes", "/v1/score")
					r["authorized"] = r["authorized"].(float64) + 1
				})
			}},
		{name: "probes_not_arrived", what: "the grader counted fewer refused requests than were sent", want: []string{"server.grader_side_effects"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseAfter, srv, "server/counters_after/0", func(m map[string]any) {
					at(m["body"], "routes", "/v1/judge")["requests"] = 0
				})
			}},
		{name: "host_listener_accepted", what: "agentpen's loopback listener accepted a connection", want: []string{"connectivity.host_listener"},
			mutate: func(t *testing.T, f *fixture) { f.obs.Listeners[0].Accepted = 1 }},
		// Campaign-wide.
		{name: "extra_labelled_container", what: "a container carrying the campaign's label that the journal does not account for", want: []string{"campaign.unexpected_containers"},
			mutate: func(t *testing.T, f *fixture) {
				f.list(t, &f.raw.ContainerList, map[string]any{"Id": otherID, "Names": []any{"/extra"}, "Labels": map[string]any{campaign.LabelCampaign: f.src.Spec.CampaignID}})
			}},
		{name: "extra_labelled_network", what: "a network carrying the campaign's label that the journal does not account for", want: []string{"campaign.unexpected_networks"},
			mutate: func(t *testing.T, f *fixture) {
				f.list(t, &f.raw.NetworkList, map[string]any{"Id": otherID, "Name": "extra", "Labels": map[string]any{campaign.LabelCampaign: f.src.Spec.CampaignID}})
			}},
	}
	// The checks every container has, once for the server and once for a
	// workspace.
	for _, sub := range []string{srv, ws0} {
		role := map[string]string{srv: "server", ws0: "workspace"}[sub]
		hc := func(t *testing.T, f *fixture, fn func(hc map[string]any)) {
			f.container(t, sub, func(m map[string]any) { fn(at(m, "HostConfig")) })
		}
		ms = append(ms,
			mutation{name: role + "_id", what: "the daemon answers the journalled id with another Id", want: []string{sub + ".id"},
				mutate: func(t *testing.T, f *fixture) { f.container(t, sub, func(m map[string]any) { m["Id"] = otherID }) }},
			mutation{name: role + "_name", what: "container Name is another", want: []string{sub + ".name"},
				mutate: func(t *testing.T, f *fixture) {
					f.container(t, sub, func(m map[string]any) { m["Name"] = "/impostor" })
				}},
			mutation{name: role + "_not_running", what: "State.Running false", want: []string{sub + ".running"},
				mutate: func(t *testing.T, f *fixture) {
					f.container(t, sub, func(m map[string]any) { at(m, "State")["Running"] = false })
				}},
			mutation{name: role + "_command", what: "Args differ from the planned command", want: []string{sub + ".command"},
				mutate: func(t *testing.T, f *fixture) {
					f.container(t, sub, func(m map[string]any) { m["Args"] = []any{"grader", "--listen", ":9999"} })
				}},
			mutation{name: role + "_network_mode_host", what: "HostConfig.NetworkMode host", want: []string{sub + ".network_mode"},
				mutate: func(t *testing.T, f *fixture) { hc(t, f, func(h map[string]any) { h["NetworkMode"] = "host" }) }},
			mutation{name: role + "_alias", fixture: "nat", what: "its alias on its (first) agent network is another", want: []string{sub + ".network_membership"},
				mutate: func(t *testing.T, f *fixture) {
					var net string
					for _, c := range f.exp.Containers {
						if c.Subject == sub {
							net = c.Nets[0]
						}
					}
					f.container(t, sub, func(m map[string]any) {
						at(m, "NetworkSettings", "Networks", net)["Aliases"] = []any{"someone-else"}
					})
				}},
			mutation{name: role + "_on_bridge", what: "also attached to the default bridge", want: []string{sub + ".networks_forbidden"},
				mutate: func(t *testing.T, f *fixture) {
					f.container(t, sub, func(m map[string]any) {
						at(m, "NetworkSettings", "Networks")["bridge"] = map[string]any{"NetworkID": otherID}
					})
				}},
			mutation{name: role + "_second_network", what: "also attached to a network outside the plan", want: []string{sub + ".networks_unplanned"},
				mutate: func(t *testing.T, f *fixture) {
					f.container(t, sub, func(m map[string]any) {
						at(m, "NetworkSettings", "Networks")["other-net"] = map[string]any{"NetworkID": otherID}
					})
				}},
			mutation{name: role + "_extra_mount", what: "an unplanned bind mount of /etc", want: []string{sub + ".mounts"},
				mutate: func(t *testing.T, f *fixture) {
					f.container(t, sub, func(m map[string]any) {
						ms, _ := m["Mounts"].([]any)
						m["Mounts"] = append(ms, map[string]any{"Type": "bind", "Source": "/etc", "Destination": "/host-etc", "RW": false})
					})
				}},
			mutation{name: role + "_extra_cap", what: "CapAdd gains CAP_NET_RAW", want: []string{sub + ".caps"},
				mutate: func(t *testing.T, f *fixture) {
					hc(t, f, func(h map[string]any) { caps, _ := h["CapAdd"].([]any); h["CapAdd"] = append(caps, "CAP_NET_RAW") })
				}},
			mutation{name: role + "_privileged", what: "Privileged true", want: []string{sub + ".privileged"},
				mutate: func(t *testing.T, f *fixture) { hc(t, f, func(h map[string]any) { h["Privileged"] = true }) }},
			mutation{name: role + "_no_nnp", what: "SecurityOpt without no-new-privileges", want: []string{sub + ".no_new_privileges"},
				mutate: func(t *testing.T, f *fixture) {
					hc(t, f, func(h map[string]any) {
						opts, _ := h["SecurityOpt"].([]any)
						h["SecurityOpt"] = slices.DeleteFunc(slices.Clone(opts), func(o any) bool { return o == "no-new-privileges" })
					})
				}},
			mutation{name: role + "_seccomp_unconfined", what: "SecurityOpt gains seccomp=unconfined", want: []string{sub + ".security_opt"},
				mutate: func(t *testing.T, f *fixture) {
					hc(t, f, func(h map[string]any) { h["SecurityOpt"] = []any{"no-new-privileges", "seccomp=unconfined"} })
				}},
			mutation{name: role + "_read_only_root_flipped", what: "ReadonlyRootfs the other way than planned", want: []string{sub + ".read_only_root"},
				mutate: func(t *testing.T, f *fixture) {
					hc(t, f, func(h map[string]any) { h["ReadonlyRootfs"] = !h["ReadonlyRootfs"].(bool) })
				}},
			mutation{name: role + "_tmpfs_unsized", what: "a /tmp tmpfs without a size", want: []string{sub + ".tmpfs"},
				mutate: func(t *testing.T, f *fixture) {
					f.container(t, sub, func(m map[string]any) { at(m, "HostConfig", "Tmpfs")["/tmp"] = "rw,nosuid,nodev,noexec" })
				}},
			mutation{name: role + "_no_init", what: "Init false", want: []string{sub + ".init"},
				mutate: func(t *testing.T, f *fixture) { hc(t, f, func(h map[string]any) { h["Init"] = false }) }},
			mutation{name: role + "_host_pid", what: "PidMode host", want: []string{sub + ".namespaces"},
				mutate: func(t *testing.T, f *fixture) { hc(t, f, func(h map[string]any) { h["PidMode"] = "host" }) }},
		)
	}
	// Every ownership label, of the network and of each container role.
	for _, k := range []string{campaign.LabelAgent, campaign.LabelCampaign, campaign.LabelCreate, campaign.LabelInstance, campaign.LabelNetwork, campaign.LabelOwner, campaign.LabelRole, campaign.LabelSchema} {
		ms = append(ms, mutation{name: "network_label_" + strings.TrimPrefix(k, "io.agentpen."), fixture: "nat", what: "network label " + k + " forged", want: []string{"networks[0].label." + k},
			mutate: func(t *testing.T, f *fixture) { f.network(t, func(m map[string]any) { at(m, "Labels")[k] = "forged" }) }})
	}
	for _, k := range []string{campaign.LabelCampaign, campaign.LabelCreate, campaign.LabelInstance, campaign.LabelOwner, campaign.LabelRole, campaign.LabelSchema, campaign.LabelTopology} {
		ms = append(ms, mutation{name: "server_label_" + strings.TrimPrefix(k, "io.agentpen."), what: "server label " + k + " removed", want: []string{"server.label." + k},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, srv, func(m map[string]any) { delete(at(m, "Config", "Labels"), k) })
			}})
	}
	// The workspace's own seccomp profile and masked paths.
	ms = append(ms,
		mutation{name: "workspace_seccomp_changed", what: "the workspace's seccomp profile allows one more call than planned", want: []string{ws0 + ".security_opt"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) {
					h := at(m, "HostConfig")
					for i, o := range h["SecurityOpt"].([]any) {
						if p, ok := strings.CutPrefix(o.(string), "seccomp="); ok {
							h["SecurityOpt"].([]any)[i] = "seccomp=" + strings.Replace(p, `"unshare"`, `"unshare","kexec_load"`, 1)
						}
					}
				})
			}},
		mutation{name: "workspace_masks_lifted", what: "the workspace's /proc paths unmasked", want: []string{ws0 + ".masked_paths"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) { at(m, "HostConfig")["MaskedPaths"] = []any{} })
			}},
	)
	// Episode code in each workspace, through its workbench.
	iso := func(t *testing.T, f *fixture, fn func(i map[string]any)) {
		f.probe(t, PhaseMain, ws0, ws0+"/episode_isolation/0", func(m map[string]any) { fn(at(m, "isolation")) })
	}
	ms = append(ms,
		mutation{name: "episode_server_pid_ns", what: "episode code in the server's PID namespace", want: []string{ws0 + ".probe.episode_isolation"},
			mutate: func(t *testing.T, f *fixture) {
				iso(t, f, func(i map[string]any) { i["episode_pid_ns"] = i["server_pid_ns"] })
			}},
		mutation{name: "episode_server_net_ns", what: "episode code in the server's network namespace", want: []string{ws0 + ".probe.episode_isolation"},
			mutate: func(t *testing.T, f *fixture) {
				iso(t, f, func(i map[string]any) { i["episode_net_ns"] = i["server_net_ns"] })
			}},
		mutation{name: "episode_eth0", what: "episode code sees an eth0", want: []string{ws0 + ".probe.episode_isolation"},
			mutate: func(t *testing.T, f *fixture) {
				iso(t, f, func(i map[string]any) { i["interfaces"] = []any{"eth0", "lo"} })
			}},
		mutation{name: "episode_vsock", what: "episode code opened a vsock socket", want: []string{ws0 + ".probe.episode_isolation"},
			mutate: func(t *testing.T, f *fixture) { iso(t, f, func(i map[string]any) { i["vsock"] = "opened" }) }},
		mutation{name: "episode_uid_only", what: "the workbench runs the uid-only sandbox", want: []string{ws0 + ".probe.episode_isolation"},
			mutate: func(t *testing.T, f *fixture) { iso(t, f, func(i map[string]any) { i["sandbox"] = "uid-only" }) }},
		mutation{name: "episode_no_finding", what: "the episode probe found nothing", want: []string{ws0 + ".probe.episode_isolation"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/episode_isolation/0", func(m map[string]any) {
					m["outcome"], m["error"] = "error", "timeout"
					delete(m, "isolation")
				})
			}},
	)
	// Isolation: uid blocks and agent -> agent.
	ms = append(ms,
		mutation{name: "uid_block_not_journalled", what: "the journal's intent carries no uid block", want: []string{ws0 + ".uid_block", ws0 + ".probe.uid_block", "isolation.uid_blocks_disjoint"},
			mutate: func(t *testing.T, f *fixture) {
				f.intent(t, ws0, func(l map[string]string) map[string]string { delete(l, campaign.LabelUIDBlock); return l })
			}},
		mutation{name: "uid_block_shared_in_campaign", what: "the daemon lists workspace 1 with workspace 0's block", want: []string{"isolation.uid_blocks_disjoint"},
			mutate: func(t *testing.T, f *fixture) {
				ws1 := f.id(t, "workspaces[1]")
				block := f.exp.Containers[1].Labels[campaign.LabelUIDBlock]
				f.raw.UIDBlocks.JSON = editJSON(t, f.raw.UIDBlocks.JSON, func(v any) any {
					for _, x := range v.([]any) {
						if m := x.(map[string]any); m["Id"] == ws1 {
							at(m, "Labels")[campaign.LabelUIDBlock] = block
						}
					}
					return v
				})
			}},
		mutation{name: "uid_block_shared_with_stranger", what: "another container on the daemon holds workspace 0's block", want: []string{"isolation.uid_blocks_disjoint"},
			mutate: func(t *testing.T, f *fixture) {
				f.list(t, &f.raw.UIDBlocks, map[string]any{"Id": otherID, "Names": []any{"/other-campaign-ws"}, "Labels": map[string]any{campaign.LabelUIDBlock: f.exp.Containers[1].Labels[campaign.LabelUIDBlock]}})
			}},
		mutation{name: "uid_block_list_unread", what: "the daemon's uid-block list could not be read", want: []string{"isolation.uid_blocks_disjoint"},
			mutate: func(t *testing.T, f *fixture) { f.raw.UIDBlocks = dockerjson.Raw{Err: "status 500"} }},
		mutation{name: "uid_block_probe_other_base", what: "the episode server runs another uid block than the journalled one", want: []string{ws0 + ".probe.uid_block"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/uid_block/0", func(m map[string]any) { m["uid_base"] = m["uid_base"].(float64) + campaign.UIDBlockSize })
			}},
		mutation{name: "grader_socket_reached", what: "a sandbox uid connected to the grader's socket", want: []string{ws0 + ".probe.grader_socket_denied"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/grader_socket_denied/0", func(m map[string]any) { m["outcome"] = "connected" })
			}},
		mutation{name: "bind_file_readable", what: "a sandbox uid could open the workspace's bind file", want: []string{ws0 + ".probe.bind_file"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/bind_file/0", func(m map[string]any) { m["outcome"] = "readable" })
			}},
		mutation{name: "bind_file_missing", what: "the workspace has no bind file (its uid's open found nothing)", want: []string{ws0 + ".probe.bind_file"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/bind_file/0", func(m map[string]any) { m["outcome"] = "denied"; delete(m, "file") })
			}},
		mutation{name: "bind_file_open_mode", what: "the bind file is readable by others, though the uid's open was denied (a closed directory)", want: []string{ws0 + ".probe.bind_file"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/bind_file/0", func(m map[string]any) { at(m, "file")["mode"] = "0444" })
			}},
		mutation{name: "bind_file_not_roots", what: "the bind file belongs to a sandbox uid", want: []string{ws0 + ".probe.bind_file"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/bind_file/0", func(m map[string]any) { at(m, "file")["uid"] = float64(campaign.UIDBlockFirst) })
			}},
		mutation{name: "git_leak", what: "a repository of the workspace holds a branch past its base", want: []string{ws0 + ".probe.git_history"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/git_history/0", func(m map[string]any) {
					m["outcome"] = "leak"
					m["git"] = []any{map[string]any{"path": "/workspace/repo", "base": strings.Repeat("a", 40), "base_from": "HEAD", "leak_count": 1,
						"leaks": []any{map[string]any{"kind": "ref", "class": "branch", "name": "refs/heads/fix", "object": strings.Repeat("b", 40), "why": "past the base"}}}}
				})
			}},
		mutation{name: "git_clean_over_a_leak", what: "the git probe says clean, its audit holds a dangling commit", want: []string{ws0 + ".probe.git_history"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/git_history/0", func(m map[string]any) {
					m["outcome"] = "clean"
					m["git"] = []any{map[string]any{"path": "/workspace/repo", "base": strings.Repeat("a", 40), "base_from": "HEAD", "leak_count": 1}}
				})
			}},
		mutation{name: "git_unaudited", what: "a repository of the workspace could not be audited (unreadable, or unsupported)", want: []string{ws0 + ".probe.git_history"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/git_history/0", func(m map[string]any) {
					m["outcome"] = "error"
					m["error"] = "/workspace/repo: object format sha256: unsupported"
					m["git"] = []any{map[string]any{"path": "/workspace/repo", "error": "object format sha256: unsupported", "leak_count": 0}}
				})
			}},
		mutation{name: "git_declared_base_ignored", what: "the spec declares a repository's base, the probe's clean audit is against its HEAD", want: []string{ws0 + ".probe.git_history"},
			mutate: func(t *testing.T, f *fixture) {
				f.src.Spec.Workspaces[0].Integrity.Bases = map[string]string{"/workspace/repo": strings.Repeat("a", 40)}
				f.probe(t, PhaseMain, ws0, ws0+"/git_history/0", func(m map[string]any) {
					m["git"] = []any{map[string]any{"path": "/workspace/repo", "base": strings.Repeat("c", 40), "base_from": "HEAD", "leak_count": 0}}
				})
			}},
		mutation{name: "workspace_env_token", what: "a token baked into the workspace's image environment", want: []string{ws0 + ".env_secrets"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) {
					cfg := at(m, "Config")
					cfg["Env"] = append(cfg["Env"].([]any), "GITHUB_TOKEN=ghp_canary0123456789")
				})
			}},
		mutation{name: "forbidden_path_readable", what: "the agent's uid can open a file the spec forbids it", want: []string{ws0 + ".probe.forbidden_paths"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/forbidden_paths/2", func(m map[string]any) { m["outcome"] = "readable" })
			}},
		mutation{name: "workbench_binary_readable", what: "the episode uid can open the workbench binary, which holds every answer key", want: []string{ws0 + ".probe.forbidden_paths"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/forbidden_paths/0", func(m map[string]any) { m["outcome"] = "readable" })
			}},
		mutation{name: "forbidden_path_unknown", what: "a forbidden path's open as the agent's uid failed otherwise (no verdict)", want: []string{ws0 + ".probe.forbidden_paths"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/forbidden_paths/0", func(m map[string]any) { m["outcome"] = "error"; m["error"] = "too many links" })
			}},
		mutation{name: "canary_reached", fixture: "per-agent", what: "a launcher's own command connected to the package registry's stand-in", want: []string{ws0 + ".probe.network_canaries"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/network_canaries/0", func(m map[string]any) { m["outcome"] = "connected"; delete(m, "error") })
			}},
		mutation{name: "canary_counted", fixture: "per-agent", what: "the probes say no stand-in was reached, the registry's stand-in counted a connection", want: []string{ws0 + ".probe.network_canaries"},
			mutate: func(t *testing.T, f *fixture) {
				for i, l := range f.obs.Listeners {
					if l.Kind == ListenerCanary && l.Class == campaign.EgressPackageRegistry {
						f.obs.Listeners[i].Accepted = 1
					}
				}
			}},
		mutation{name: "metadata_standin_reached", fixture: "per-agent", what: "the metadata service's stand-in was reached, the route to the address leaves the same way", want: []string{ws0 + ".probe.network_canaries"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/network_canaries/3", func(m map[string]any) { m["outcome"] = "connected"; delete(m, "error") })
			}},
		mutation{name: "metadata_route_elsewhere", fixture: "per-agent", what: "the route to the metadata address leaves another way than the route to its stand-in", want: []string{ws0 + ".probe.network_canaries"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/network_canaries/4", func(m map[string]any) { m["source"] = "10.0.0.1" })
			}},
		mutation{name: "metadata_route_no_reference", fixture: "per-agent", what: "a route to the metadata address, none to the stand-in it is compared with", want: []string{ws0 + ".probe.network_canaries"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/network_canaries/5", func(m map[string]any) { m["outcome"] = "unreachable"; delete(m, "source") })
			}},
		mutation{name: "canary_interface", what: "a launcher's own command in a campaign without networks has an eth0", want: []string{ws2 + ".probe.network_canaries"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws2, ws2+"/network_canaries/0", func(m map[string]any) { m["interfaces"] = []any{"eth0", "lo"} })
			}},
		mutation{name: "canary_not_allowed", fixture: "nat", what: "the spec no longer allows the launcher's kind of host under nat, whose route out reaches every host", want: []string{ws2 + ".probe.network_canaries"},
			mutate: func(t *testing.T, f *fixture) {
				f.src.Spec.Workspaces[2].Integrity.AllowedEgress = []string{campaign.EgressPackageRegistry, campaign.EgressCodeHost, campaign.EgressMetadata}
			}},
		mutation{name: "own_command_holds_key", fixture: "per-agent", what: "a launcher's own command holds the grader's key (by any name: api_key; this one looks secret too)", want: []string{ws0 + ".api_key", ws0 + ".env_secrets"},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) {
					cfg := at(m, "Config")
					cfg["Env"] = append(cfg["Env"].([]any), campaign.DefaultAPIKeyEnv+"=attest-fixture-key-9c41d7e2b8a05f36")
				})
			}},
		mutation{name: "agent_interface", what: "a workspace of a campaign without networks has an eth0", want: []string{ws0 + ".probe.agent_to_agent"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/agent_to_agent/0", func(m map[string]any) { m["interfaces"] = []any{"eth0", "lo"} })
			}},
		mutation{name: "agent_reached", fixture: "nat", what: "a workspace's connect to another workspace was refused (an answer: a path)", want: []string{ws0 + ".probe.agent_to_agent"},
			mutate: func(t *testing.T, f *fixture) {
				f.probe(t, PhaseMain, ws0, ws0+"/agent_to_agent/0", func(m map[string]any) { m["outcome"] = "refused" })
			}},
	)
	for _, k := range []string{campaign.LabelAgent, campaign.LabelCampaign, campaign.LabelCreate, campaign.LabelInstance, campaign.LabelNetwork, campaign.LabelOwner, campaign.LabelRole, campaign.LabelSchema, campaign.LabelTopology, campaign.LabelUIDBlock} {
		ms = append(ms, mutation{name: "workspace_label_" + strings.TrimPrefix(k, "io.agentpen."), what: "workspace label " + k + " forged", want: []string{ws0 + ".label." + k},
			mutate: func(t *testing.T, f *fixture) {
				f.container(t, ws0, func(m map[string]any) { at(m, "Config", "Labels")[k] = "forged" })
			}})
	}
	return ms
}

// TestMutations: each one-field mutation of a good fixture (Docker's
// and the cluster's tables) makes the report not ok and fails exactly the
// checks of its row.
func TestMutations(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range append(mutations(), clusterMutations()...) {
		if seen[m.name] {
			t.Fatalf("duplicate row %s", m.name)
		}
		seen[m.name] = true
		t.Run(m.name, func(t *testing.T) {
			name := m.fixture
			if name == "" {
				name = "internal"
			}
			f := loadFixture(t, name)
			m.mutate(t, f)
			rep := Evaluate(f.src, f.observed())
			want := slices.Clone(m.want)
			sort.Strings(want)
			if rep.OK {
				t.Fatalf("%s: still ok", m.what)
			}
			if diff := cmp.Diff(want, rep.FailedChecks); diff != "" {
				t.Fatalf("%s: failed checks (-want +got):\n%s\n%s", m.what, diff, strings.Join(rep.FailureLines(), "\n"))
			}
			for _, c := range rep.FailedChecks {
				if rep.Checks()[c].Reason == "" {
					t.Errorf("%s failed without a reason", c)
				}
			}
		})
	}
}

// TestMutationsCoverEveryCheck: every check a good report makes (any
// workspace standing for all), in either fixture, is the target of a row
// of the table.
func TestMutationsCoverEveryCheck(t *testing.T) {
	covered := map[string]bool{}
	for _, m := range mutations() {
		for _, c := range m.want {
			covered[normalize(c)] = true
		}
	}
	for _, name := range fixtureNames {
		rep := Evaluate(loadFixture(t, name).src, loadFixture(t, name).observed())
		for c := range rep.Checks() {
			if !covered[normalize(c)] {
				t.Errorf("%s: check %s has no mutation in the table", name, c)
			}
		}
	}
	if os.Getenv("ATTEST_PRINT_TABLE") == "1" {
		var b bytes.Buffer
		for _, m := range mutations() {
			fx := m.fixture
			if fx == "" {
				fx = "internal"
			}
			fmt.Fprintf(&b, "| %s | %s (%s) |\n", strings.Join(m.want, ", "), m.what, fx)
		}
		t.Log("\n" + b.String())
	}
}

// TestNeverOKWithoutEvidence: take any one piece of evidence away and the
// report is not ok (the lie "ok" cannot be told by omission).
func TestNeverOKWithoutEvidence(t *testing.T) {
	for _, tt := range []struct {
		name string
		drop func(f *fixture)
		// only names the one fixture the evidence exists in ("" for both).
		only string
	}{
		{"no_info", func(f *fixture) { f.raw.Info = dockerjson.Raw{} }, ""},
		{"no_network", func(f *fixture) { f.raw.Networks = nil }, "nat"},
		{"no_uid_blocks", func(f *fixture) { f.raw.UIDBlocks = dockerjson.Raw{} }, ""},
		{"no_containers", func(f *fixture) { f.raw.Containers = nil }, ""},
		{"no_images", func(f *fixture) { f.raw.Images = nil }, ""},
		{"no_container_list", func(f *fixture) { f.raw.ContainerList = dockerjson.Raw{} }, ""},
		{"no_network_list", func(f *fixture) { f.raw.NetworkList = dockerjson.Raw{} }, ""},
		{"no_runs", func(f *fixture) { f.obs.Runs = nil }, ""},
		{"no_listeners", func(f *fixture) { f.obs.Listeners = nil }, ""},
		{"no_endpoint", func(f *fixture) { f.raw.Endpoint = "" }, ""},
		{"no_bringup_record", func(f *fixture) { f.src.Bringup = DaemonRecord{} }, ""},
		{"no_journal", func(f *fixture) { f.src.Records = nil }, ""},
		{"no_roles", func(f *fixture) { f.src.Roles = nil }, ""},
		{"empty_observation", func(f *fixture) { f.obs, f.raw = Observation{}, dockerjson.Capture{} }, ""},
		{"bad_spec", func(f *fixture) { f.src.Spec.CampaignID = "" }, ""},
		{"main_exec_failed", func(f *fixture) {
			for i := range f.obs.Runs {
				if f.obs.Runs[i].Phase == PhaseMain {
					f.obs.Runs[i].ExitCode = 2
				}
			}
		}, ""},
		{"stdout_truncated", func(f *fixture) {
			for i := range f.obs.Runs {
				f.obs.Runs[i].Stdout = f.obs.Runs[i].Stdout[:len(f.obs.Runs[i].Stdout)/2]
			}
		}, ""},
		{"output_of_another_container", func(f *fixture) {
			for i := range f.obs.Runs {
				if f.obs.Runs[i].Phase == PhaseMain {
					f.obs.Runs[i].Stdout = strings.Replace(f.obs.Runs[i].Stdout, `"container_id":"`, `"container_id":"0`, 1)
				}
			}
		}, ""},
		{"a_result_twice", func(f *fixture) {
			for i := range f.obs.Runs {
				if f.obs.Runs[i].Phase == PhaseMain {
					var out map[string]any
					json.Unmarshal([]byte(f.obs.Runs[i].Stdout), &out)
					rs := out["results"].([]any)
					out["results"] = append(rs, rs[0])
					b, _ := json.Marshal(out)
					f.obs.Runs[i].Stdout = string(b)
				}
			}
		}, ""},
		{"results_of_another_exec", func(f *fixture) {
			// Every workspace run answers with the first workspace's output:
			// ids do not match, nothing is evidence.
			var first string
			for _, r := range f.obs.Runs {
				if r.Phase == PhaseMain && first == "" {
					first = r.Stdout
				}
			}
			for i := range f.obs.Runs {
				if f.obs.Runs[i].Phase == PhaseMain {
					f.obs.Runs[i].Stdout = strings.ReplaceAll(first, "workspaces[0]/", "workspaces[9]/")
				}
			}
		}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, name := range fixtureNames {
				if tt.only != "" && tt.only != name {
					continue
				}
				f := loadFixture(t, name)
				tt.drop(f)
				if rep := Evaluate(f.src, f.observed()); rep.OK || len(rep.FailedChecks) == 0 {
					t.Fatalf("%s: ok without the evidence", name)
				}
			}
		})
	}
}

// TestReportHasNoEnvValues: a value that is only in the containers'
// environment (the fixture's API key, and every other variable's value)
// never reaches the report; the key's fingerprint does.
func TestReportHasNoEnvValues(t *testing.T) {
	for _, name := range fixtureNames {
		f := loadFixture(t, name)
		b, _ := Evaluate(f.src, f.observed()).Marshal()
		var values []string
		for _, raw := range f.raw.Containers {
			var c struct{ Config struct{ Env []string } }
			json.Unmarshal(raw.JSON, &c)
			for _, kv := range c.Config.Env {
				_, v, _ := strings.Cut(kv, "=")
				values = append(values, v)
			}
		}
		key := ""
		for _, v := range values {
			if apikey.Fingerprint(v) == f.src.AgentpenKey.Fingerprint {
				key = v
			}
		}
		if key == "" || !bytes.Contains(b, []byte(apikey.Fingerprint(key))) {
			t.Fatalf("%s: the key's fingerprint is not in the report", name)
		}
		if bytes.Contains(b, []byte(key)) {
			t.Fatalf("%s: the report holds the key", name)
		}
		for _, v := range values {
			// Values that are also names, paths or URLs of the plan are
			// expected elsewhere; the key and "C.UTF-8"-like settings are not.
			// The agent id is the agent's public name (also a label).
			if len(v) >= 8 && !strings.Contains(v, "agentpen") && !strings.HasPrefix(v, "agent-") && !strings.Contains(v, "/") && bytes.Contains(b, []byte(v)) {
				t.Errorf("%s: the report holds an environment value %q", name, v)
			}
		}
	}
}

// TestImageRepoDigest: a server pinned as repo@sha256 attests when the
// container runs the image carrying that repo digest, and not otherwise.
func TestImageRepoDigest(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	for _, tt := range []struct {
		name    string
		digests []any
		ok      bool
	}{
		{"carries_it", []any{"agentpen/workbench@" + digest}, true},
		{"another_digest", []any{"agentpen/workbench@sha256:" + strings.Repeat("b", 64)}, false},
		{"other_repo", []any{"evil/workbench@" + digest}, false},
		{"none", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := loadFixture(t, "internal")
			id := f.src.Spec.Server.Image
			ref := "agentpen/workbench:v1@" + digest // a tag beside the digest is allowed
			f.src.Spec.Server.Image = ref
			img := f.raw.Images[id]
			img.JSON = editJSON(t, img.JSON, func(v any) any { v.(map[string]any)["RepoDigests"] = tt.digests; return v })
			f.raw.Images[ref] = img
			rep := Evaluate(f.src, f.observed())
			if rep.OK != tt.ok {
				t.Fatalf("ok %v, want %v: %v", rep.OK, tt.ok, rep.FailureLines())
			}
			if !tt.ok && !slices.Contains(rep.FailedChecks, "server.image") {
				t.Fatalf("failed %v, want server.image among them", rep.FailedChecks)
			}
		})
	}
}

// TestImageTag: a spec that names its images by a local tag is judged by
// the image ids its bring-up pinned the tags to (the begin record's
// images): it attests when the containers run those ids, whatever the tag
// names now; a container on another image fails, and so does a tag the
// journal pinned to nothing (fail closed: no plan, no expectation).
func TestImageTag(t *testing.T) {
	const tag = "agentpen/workbench:dev"
	tagged := func(t *testing.T, pinned bool) *fixture {
		f := loadFixture(t, "internal")
		id := f.src.Spec.Server.Image
		f.src.Spec.Server.Image = tag
		for i := range f.src.Spec.Workspaces {
			f.src.Spec.Workspaces[i].Image = tag
		}
		if pinned {
			for i, r := range f.src.Records {
				if r.Op == campaign.OpBegin {
					f.src.Records[i].Images = map[string]string{tag: id}
				}
			}
		}
		return f
	}
	f := tagged(t, true)
	if rep := Evaluate(f.src, f.observed()); !rep.OK {
		t.Fatalf("a tag pinned to the id the containers run: %v", rep.FailureLines())
	}
	f = tagged(t, true)
	f.container(t, ws0, func(m map[string]any) { m["Image"] = "sha256:" + strings.Repeat("e", 64) })
	if rep := Evaluate(f.src, f.observed()); rep.OK || !slices.Contains(rep.FailedChecks, ws0+".image") {
		t.Fatalf("a workspace on another image: ok %v, failed %v", rep.OK, rep.FailedChecks)
	}
	f = tagged(t, false)
	if rep := Evaluate(f.src, f.observed()); rep.OK || !strings.Contains(rep.Error, "none is recorded") {
		t.Fatalf("a tag the journal pinned to nothing: ok %v, error %q", rep.OK, rep.Error)
	}
}

// TestGitAuditedOnce: the git audit runs in the first attestation
// covering a workspace (its agent has not worked yet); once an
// attestation of the generation covered it, a later one plans no git
// probe and holds no git check (the agent's own commits are not a leak
// of the image), and a workspace made again after it is audited again.
func TestGitAuditedOnce(t *testing.T) {
	f := loadFixture(t, "internal")
	planned := func(src Source) []string {
		t.Helper()
		e, err := expect(src)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, pr := range planProbes(e, ProbeEnv{}, nil).probes {
			if pr.req.Kind == wire.KindGit {
				out = append(out, pr.subject)
			}
		}
		return out
	}
	if got := planned(f.src); !slices.Equal(got, []string{"workspaces[0]", "workspaces[1]", "workspaces[2]"}) {
		t.Fatalf("first attestation: git probes of %v", got)
	}
	gens := campaign.Generations(f.src.Records)
	gen := gens[len(gens)-1].N
	src := f.src
	src.Records = append(slices.Clone(f.src.Records), campaign.Record{Op: campaign.OpAttested, Gen: gen, Status: campaign.AttestOK})
	if got := planned(src); len(got) != 0 {
		t.Fatalf("a later attestation: git probes of %v", got)
	}
	rep := Evaluate(src, f.observed())
	for c := range rep.Checks() {
		if strings.Contains(c, "git_history") {
			t.Fatalf("a later attestation holds %s", c)
		}
	}
	// workspaces[1] made again after that attestation: audited again.
	for _, r := range f.src.Records {
		if r.Op == campaign.OpIntent && r.Kind == campaign.KindContainer && r.Role == campaign.RoleWork && r.Name == f.exp.Containers[2].Name {
			src.Records = append(src.Records, r)
		}
	}
	if got := planned(src); !slices.Equal(got, []string{"workspaces[1]"}) {
		t.Fatalf("a workspace made again: git probes of %v", got)
	}
	// An earlier generation's attestation covers nothing of this one.
	src.Records = append(slices.Clone(f.src.Records), campaign.Record{Op: campaign.OpAttested, Gen: gen - 1, Status: campaign.AttestOK})
	if got := planned(src); len(got) != 3 {
		t.Fatalf("another generation's attestation: git probes of %v", got)
	}
	// Nor does a failed one, of the campaign or of a refill's slots: the
	// campaign was not handed out on it, and what it failed on (a leak)
	// is looked at again.
	src.Records = append(slices.Clone(f.src.Records), campaign.Record{Op: campaign.OpAttested, Gen: gen, Status: campaign.AttestFailed})
	if got := planned(src); len(got) != 3 {
		t.Fatalf("after a failed attestation: git probes of %v", got)
	}
}

// TestGitLeakFailsEveryAttestation: a leaking repository fails the first
// attestation, and again the next one: a failed attestation does not
// count as the audit that covers a workspace. It used to, and an
// attestation asked again passed with the same leak in place.
func TestGitLeakFailsEveryAttestation(t *testing.T) {
	leaking := func(t *testing.T) *fixture {
		f := loadFixture(t, "internal")
		f.probe(t, PhaseMain, ws0, ws0+"/git_history/0", func(m map[string]any) {
			m["outcome"] = "leak"
			m["git"] = []any{map[string]any{"path": "/workspace/repo", "base": strings.Repeat("a", 40), "base_from": "HEAD", "leak_count": float64(1),
				"leaks": []any{map[string]any{"kind": "ref", "class": "branch", "name": "refs/heads/fix", "why": "past the base"}}}}
		})
		return f
	}
	f := leaking(t)
	if rep := Evaluate(f.src, f.observed()); rep.OK || !slices.Contains(rep.FailedChecks, ws0+".probe.git_history") {
		t.Fatalf("the first attestation: ok %v, failed %v", rep.OK, rep.FailedChecks)
	}
	f = leaking(t)
	gens := campaign.Generations(f.src.Records)
	f.src.Records = append(slices.Clone(f.src.Records), campaign.Record{Op: campaign.OpAttested, Gen: gens[len(gens)-1].N, Status: campaign.AttestFailed})
	if rep := Evaluate(f.src, f.observed()); rep.OK || !slices.Contains(rep.FailedChecks, ws0+".probe.git_history") {
		t.Fatalf("the attestation after a failed one: ok %v, failed %v", rep.OK, rep.FailedChecks)
	}
}

// TestGitCache: a clean audit is learnt under its cache key; the next
// attestation tells the workspace's probe the state key, and a
// repository the probe found unchanged passes as that audit, Cached. A
// probe that says cached under another key, or with no cache given, or
// in a container the runtime says runs another image than the one the
// audit was learnt in (a tag repointed: the reference is the same),
// fails.
func TestGitCache(t *testing.T) {
	const key = "sha256:0123"
	setGit := func(f *fixture, audit map[string]any) {
		f.probe(t, PhaseMain, ws0, ws0+"/git_history/0", func(m map[string]any) {
			m["outcome"] = "clean"
			m["git"] = []any{audit}
		})
	}
	// The base is declared: a cached audit is judged as the audit it
	// stands for (its base among the rest).
	declare := func(f *fixture) {
		f.src.Spec.Workspaces[0].Integrity.Bases = map[string]string{"/workspace/repo": strings.Repeat("a", 40)}
	}
	full := map[string]any{"path": "/workspace/repo", "base": strings.Repeat("a", 40), "base_from": "declared", "objects": float64(10), "leak_count": float64(0), "state_key": key}
	f := loadFixture(t, "internal")
	declare(f)
	setGit(f, full)
	rep := Evaluate(f.src, f.observed())
	if !rep.OK {
		t.Fatalf("a full clean audit: %v", rep.FailureLines())
	}
	cache := GitCache{}
	cache.Learn(rep)
	if len(cache) != 3 { // every workspace's audit passed (the others found no repository)
		t.Fatalf("learnt %d keys, want 3", len(cache))
	}

	cached := map[string]any{"path": "/workspace/repo", "leak_count": float64(0), "state_key": key, "cached": true}
	for _, tt := range []struct {
		name   string
		cache  GitCache
		audit  map[string]any
		image  string // the image id the runtime reports ws0 runs, when another
		passes bool
	}{
		{"cached_known", cache, cached, "", true},
		{"cached_other_key", cache, map[string]any{"path": "/workspace/repo", "leak_count": float64(0), "state_key": "sha256:4567", "cached": true}, "", false},
		{"cached_without_cache", nil, cached, "", false},
		{"cached_other_image", cache, cached, "sha256:" + strings.Repeat("e", 64), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := loadFixture(t, "internal")
			declare(f)
			setGit(f, tt.audit)
			obs := f.observed()
			if tt.image != "" {
				c := obs.Runtime.Containers[f.id(t, ws0)]
				c.Image = tt.image
				obs.Runtime.Containers[f.id(t, ws0)] = c
				obs.ProbeEnv.Images = (&Expectation{f.exp}).ImageIDs(obs)
			}
			obs.ProbeEnv.GitCache = tt.cache
			rep := Evaluate(f.src, obs)
			c := rep.Checks()[ws0+".probe.git_history"]
			if c.Pass != tt.passes {
				t.Fatalf("pass %v (%s), want %v", c.Pass, c.Reason, tt.passes)
			}
			if !tt.passes {
				return
			}
			for _, rec := range rep.Connectivity.Probes {
				if rec.Check == ws0+".probe.git_history" && (len(rec.Git) != 1 || !rec.Git[0].Cached || rec.Git[0].Objects != 10 || rec.CacheKey == "") {
					t.Fatalf("the record of a cached audit: %+v", rec)
				}
			}
		})
	}
}

// TestMetadataRouteAsTheStandIns: the captured route to the metadata
// address leaves as the route to its stand-in does, and the stand-in was
// refused: it passes (the per-agent fixture attests). The same route with
// no stand-in refused fails: nothing speaks for it.
func TestMetadataRouteAsTheStandIns(t *testing.T) {
	f := loadFixture(t, "per-agent")
	rep := Evaluate(f.src, f.observed())
	if c := rep.Checks()[ws0+".probe.network_canaries"]; !c.Pass {
		t.Fatalf("the captured campaign: %s", c.Reason)
	}
	f.probe(t, PhaseMain, ws0, ws0+"/network_canaries/3", func(m map[string]any) { m["outcome"] = "error"; m["error"] = "no verdict" })
	rep = Evaluate(f.src, f.observed())
	c := rep.Checks()[ws0+".probe.network_canaries"]
	if c.Pass || !strings.Contains(c.Reason, "the way to a stand-in that was not shown unreachable") {
		t.Fatalf("the metadata stand-in without a verdict: pass %v, reason %q; want the route named", c.Pass, c.Reason)
	}
}
