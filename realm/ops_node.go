package realm

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// registerCore adds the operations every node has: discovery, the catalog
// and credentials.
func (n *Node) registerCore() {
	n.reg.Add(
		api.Define("get_health", http.MethodGet, "/api/v1/health", "Health: version, schema, store settings in force and store state.", api.Public, n.health),
		api.Define("get_manifest", http.MethodGet, "/api/v1/manifest", "The language: version, realm, limits, kinds, states, profiles, endpoints.", api.Public, n.manifest),
	)
	n.registerCatalog()
	n.registerTokens()
	n.registerAccess()
}

// HealthOut is the answer of get_health.
type HealthOut struct {
	Status        string         `json:"status" jsonschema:"ok; the store's state when it is not; degraded when alarms says why"`
	Alarms        []string       `json:"alarms,omitempty" jsonschema:"what the operator should know: the disk nearly full, this realm's key seen signing elsewhere, new events waiting for this realm's chain to be brought level"`
	Version       string         `json:"version"`
	Schema        int            `json:"schema" jsonschema:"the store's schema version"`
	Realm         string         `json:"realm"`
	PeerID        string         `json:"peer_id"`
	P2P           []string       `json:"p2p" jsonschema:"the node's libp2p addresses, ending in /p2p/<peer id>; empty when it does not federate"`
	Pragmas       map[string]any `json:"pragmas" jsonschema:"the store settings in force"`
	Store         HealthStore    `json:"store"`
	UptimeSeconds int64          `json:"uptime_seconds"`
	Time          time.Time      `json:"time"`
}

// HealthStore is the store's state in the health answer.
type HealthStore struct {
	State     string `json:"state"`
	Sequence  uint64 `json:"sequence" jsonschema:"the node's corpus sequence: every event stored, in arrival order"`
	Events    uint64 `json:"events"`
	Realms    int    `json:"realms"`
	LSMBytes  int64  `json:"lsm_bytes" jsonschema:"the size of the store's LSM tree files"`
	VLogBytes int64  `json:"vlog_bytes" jsonschema:"the size of the store's value log files, as the file system reports it: Badger sizes each new one at 2 GiB up front, so this is not the data they hold"`
}

func (n *Node) health(ctx context.Context, c *api.Call, _ api.NoInput) (HealthOut, error) {
	st := n.store.State()
	status := "ok"
	var alarms []string
	if f := n.fedSet.Load(); f != nil {
		for _, a := range f.OwnChainAlarms() {
			alarms = append(alarms, "this realm's key signs elsewhere ("+a.Kind+"): "+a.Detail)
		}
		switch held, to := f.OwnHeld(); {
		case held && to > 0:
			alarms = append(alarms, fmt.Sprintf("a peer holds this realm's chain to seq %d, beyond this node's copy: new events wait until it is taken", to))
		case f.OwnRestored():
			alarms = append(alarms, "this realm was restored from an export: new events wait until its chain was compared with a peer that carries it (relay peer add, or --peer); relay serve --restored-is-latest if no peer holds newer events of it")
		case held:
			alarms = append(alarms, "new events wait for a first exchange of heads with a peer that carries this realm (at most 5 s after the start)")
		}
	}
	if low, free := n.store.DiskLow(); low {
		alarms = append(alarms, fmt.Sprintf("the disk holding the store has %d MiB free: writes are refused until space is freed", free>>20))
	}
	if len(alarms) > 0 {
		status = "degraded"
	}
	if st.Status != "ok" {
		status = st.Status
	}
	return HealthOut{
		Status:  status,
		Alarms:  alarms,
		Version: Version,
		Schema:  store.SchemaVersion,
		Realm:   string(n.realm),
		PeerID:  n.PeerID(),
		P2P:     n.p2pAddrs(),
		Pragmas: map[string]any{
			"sync_writes":  st.SyncWrites,
			"group_commit": true,
			"compression":  st.Compression,
			"in_memory":    st.InMemory,
		},
		Store: HealthStore{
			State: st.Status, Sequence: st.Sequence, Events: st.Events, Realms: st.Realms,
			LSMBytes: st.LSMBytes, VLogBytes: st.VLogBytes,
		},
		UptimeSeconds: int64(time.Since(n.started).Seconds()),
		Time:          time.Now().UTC(),
	}, nil
}

// Endpoint is one operation as the manifest and the catalog list it.
type Endpoint struct {
	Key     string `json:"key" jsonschema:"the operation key; where the operation is an MCP tool, also its name (get_api_operation says at which endpoint)"`
	Method  string `json:"method"`
	Path    string `json:"path"`
	Purpose string `json:"purpose"`
	Access  string `json:"access" jsonschema:"public, human, or right:<right>"`
}

func endpointOf(op *api.Operation) Endpoint {
	return Endpoint{Key: op.Key, Method: op.Method, Path: op.Path, Purpose: op.Purpose, Access: op.Access.String()}
}

// ManifestOut is the answer of get_manifest: the source of truth.
type ManifestOut struct {
	Parley        string                  `json:"parley"`
	Server        string                  `json:"server"`
	Version       string                  `json:"version"`
	Realm         string                  `json:"realm"`
	PeerID        string                  `json:"peer_id"`
	P2P           []string                `json:"p2p" jsonschema:"the node's libp2p addresses; empty when it does not federate"`
	MCP           string                  `json:"mcp" jsonschema:"the MCP endpoint path (JSON-RPC 2.0, stateless, bearer token)"`
	Human         string                  `json:"human" jsonschema:"the identity of the realm's human"`
	Limits        protocol.ParleyLimits   `json:"limits" jsonschema:"requests_per_minute 0 means no rate limit"`
	Kinds         []protocol.Act          `json:"kinds"`
	States        []protocol.State        `json:"states"`
	Profiles      []string                `json:"profiles"`
	ClaimStates   []protocol.ClaimState   `json:"claim_states"`
	Verdicts      []protocol.Verdict      `json:"verdicts"`
	EvidenceKinds []protocol.EvidenceKind `json:"evidence_kinds"`
	Rights        []protocol.Right        `json:"rights"`
	Reasons       []string                `json:"reasons"`
	Endpoints     []Endpoint              `json:"endpoints"`
}

func (n *Node) manifest(ctx context.Context, c *api.Call, _ api.NoInput) (ManifestOut, error) {
	m := ManifestOut{
		Parley:        protocol.ParleyVersion,
		Server:        "relay",
		Version:       Version,
		Realm:         string(n.realm),
		PeerID:        n.PeerID(),
		P2P:           n.p2pAddrs(),
		MCP:           "/api/v1/mcp",
		Human:         protocol.Identity{Prefix: protocol.HumanPrefix, Line: n.cfg.HumanName}.String(),
		Limits:        n.limits,
		Kinds:         protocol.Acts,
		States:        protocol.States,
		Profiles:      []string{"dialectic"},
		ClaimStates:   protocol.ClaimStates,
		Verdicts:      protocol.Verdicts,
		EvidenceKinds: protocol.EvidenceKinds,
		Rights:        protocol.AllRights,
	}
	for _, r := range protocol.Reasons {
		m.Reasons = append(m.Reasons, string(r.Reason))
	}
	for _, op := range n.reg.Operations() {
		m.Endpoints = append(m.Endpoints, endpointOf(op))
	}
	return m, nil
}

func (n *Node) p2pAddrs() []string {
	if n.fed == nil {
		return []string{}
	}
	return n.fed.Addrs()
}
