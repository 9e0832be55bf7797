package realm

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"relay/federation"
	"relay/protocol"
	"relay/realm/api"
	"relay/store"
)

// registerFederation adds the operator's federation API: status, peers,
// realms and blocks.
func (n *Node) registerFederation() {
	n.reg.Add(
		api.Define("get_federation", http.MethodGet, "/api/v1/federation", "The federation at a glance: this realm's peer ID and addresses, counters, key conflicts and equivocations (the realm's human only).", api.HumanOnly, n.federationStatus),
		api.Define("get_federation_descriptor", http.MethodGet, "/api/v1/federation/descriptor", "The realm's signed descriptor: its name, key and p2p addresses, signed by the realm key (what peers pin).", api.Public, n.descriptor),
		api.Define("get_federation_peers", http.MethodGet, "/api/v1/federation/peers", "The peers with their connection state and what each has acknowledged (the realm's human only).", api.HumanOnly, n.listPeers),
		api.Define("post_federation_peers", http.MethodPost, "/api/v1/federation/peers", "Add a peer by its multiaddr ending in /p2p/<peer id>; kept, admitted and dialled with backoff (the realm's human only).", api.HumanOnly, n.addPeer),
		api.Define("delete_federation_peers_id", http.MethodDelete, "/api/v1/federation/peers/{id}", "Remove a peer and hang up on it (the realm's human only).", api.HumanOnly, n.removePeer),
		api.Define("get_federation_realms", http.MethodGet, "/api/v1/federation/realms", "Every realm held or known: head, newest seq seen at a peer, lag, block and quarantine (the realm's human only).", api.HumanOnly, n.listRealms),
		api.Define("post_federation_blocks", http.MethodPost, "/api/v1/federation/blocks", "Block a realm: its events are no longer stored, served or relayed (the realm's human only).", api.HumanOnly, n.blockRealm),
		api.Define("delete_federation_blocks_realm", http.MethodDelete, "/api/v1/federation/blocks/{realm}", "Unblock a realm (and lift a quarantine); sync resumes (the realm's human only).", api.HumanOnly, n.unblockRealm),
	)
}

func (n *Node) needFederation() (*federation.Service, error) {
	if n.fed == nil {
		return nil, protocol.Refusef(protocol.ReasonNotFound, "This node does not federate: it runs without p2p listen addresses (relay serve --no-p2p).")
	}
	return n.fed, nil
}

// FederationOut is the answer of get_federation.
type FederationOut struct {
	Realm          string                `json:"realm"`
	PeerID         string                `json:"peer_id"`
	Addrs          []string              `json:"addrs" jsonschema:"full p2p addresses to give other operators"`
	Counters       federation.Counters   `json:"counters"`
	Conflicts      []federation.Conflict `json:"key_conflicts" jsonschema:"other keys that claimed a pinned realm name; refused"`
	Equivocations  []EquivocationOut     `json:"equivocations" jsonschema:"two events for one (realm, seq): evidence kept"`
	Blocked        []federation.Block    `json:"blocked"`
	PeersConnected int                   `json:"peers_connected"`
	// OwnChain is what showed this realm's key signing events this node
	// did not: the operator must act before the realm forks.
	OwnChain []federation.OwnChainAlarm `json:"own_chain" jsonschema:"evidence that this realm's key signs elsewhere, or that this node's log is behind what it published"`
}

// EquivocationOut is one piece of equivocation evidence.
type EquivocationOut struct {
	Realm string `json:"realm"`
	Seq   uint64 `json:"seq"`
	CID   string `json:"cid"`
}

func (n *Node) federationStatus(ctx context.Context, c *api.Call, _ api.NoInput) (FederationOut, error) {
	f, err := n.needFederation()
	if err != nil {
		return FederationOut{}, err
	}
	out := FederationOut{Realm: string(n.realm), PeerID: n.PeerID(), Addrs: f.Addrs(), Counters: f.Counters(),
		Conflicts: f.Directory().Conflicts(), Blocked: f.Blocked(), Equivocations: []EquivocationOut{}, OwnChain: f.OwnChainAlarms()}
	if out.OwnChain == nil {
		out.OwnChain = []federation.OwnChainAlarm{}
	}
	evs, err := n.store.Equivocations()
	if err != nil {
		return FederationOut{}, err
	}
	for _, e := range evs {
		out.Equivocations = append(out.Equivocations, EquivocationOut{Realm: string(e.Realm), Seq: e.Seq, CID: e.CID.String()})
	}
	for _, p := range f.Peers() {
		if p.State == "connected" {
			out.PeersConnected++
		}
	}
	return out, nil
}

// DescriptorOut is the realm's signed descriptor, decoded and as signed.
type DescriptorOut struct {
	Realm  string    `json:"realm"`
	PeerID string    `json:"peer_id"`
	Key    string    `json:"key" jsonschema:"the realm's ed25519 public key, base64"`
	Addrs  []string  `json:"addrs"`
	At     time.Time `json:"at"`
	Signed string    `json:"signed" jsonschema:"the descriptor as signed: canonical DAG-CBOR, base64"`
}

func (n *Node) descriptor(ctx context.Context, c *api.Call, _ api.NoInput) (DescriptorOut, error) {
	f, err := n.needFederation()
	if err != nil {
		return DescriptorOut{}, err
	}
	d, raw := f.Descriptor()
	return DescriptorOut{Realm: d.Realm, PeerID: n.PeerID(), Key: base64.StdEncoding.EncodeToString(d.Key), Addrs: d.Addrs,
		At: time.UnixMilli(d.At).UTC(), Signed: base64.StdEncoding.EncodeToString(raw)}, nil
}

// PeersOut lists peers.
type PeersOut struct {
	Peers []federation.PeerStatus `json:"peers"`
}

func (n *Node) listPeers(ctx context.Context, c *api.Call, _ api.NoInput) (PeersOut, error) {
	f, err := n.needFederation()
	if err != nil {
		return PeersOut{}, err
	}
	return PeersOut{Peers: f.Peers()}, nil
}

type addPeerIn struct {
	Addr string `json:"addr" jsonschema:"the peer's multiaddr ending in /p2p/<peer id>, e.g. /ip4/192.0.2.7/tcp/4001/p2p/12D3Koo…"`
}

// PeerOut is one peer.
type PeerOut struct {
	Peer federation.PeerStatus `json:"peer"`
}

func (n *Node) addPeer(ctx context.Context, c *api.Call, in addPeerIn) (PeerOut, error) {
	f, err := n.needFederation()
	if err != nil {
		return PeerOut{}, err
	}
	p, err := f.AddPeer(ctx, strings.TrimSpace(in.Addr))
	if err != nil {
		if errors.Is(err, store.ErrFailed) || errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrDiskFull) {
			return PeerOut{}, err
		}
		return PeerOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "%v", err).With("field", "addr").With("rule", "format")
	}
	return PeerOut{Peer: p}, nil
}

type peerIDIn struct {
	ID string `json:"id" jsonschema:"the peer ID"`
}

// DoneOut says an operation took effect.
type DoneOut struct {
	OK bool `json:"ok"`
}

func (n *Node) removePeer(ctx context.Context, c *api.Call, in peerIDIn) (DoneOut, error) {
	f, err := n.needFederation()
	if err != nil {
		return DoneOut{}, err
	}
	if err := f.RemovePeer(ctx, in.ID); err != nil {
		if errors.Is(err, store.ErrFailed) || errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrDiskFull) {
			return DoneOut{}, err
		}
		return DoneOut{}, protocol.Refusef(protocol.ReasonNotFound, "No peer %q; relay peer list (get_federation_peers) lists them.", in.ID)
	}
	return DoneOut{OK: true}, nil
}

// RealmsOut lists realms.
type RealmsOut struct {
	Realms []federation.RealmStatus `json:"realms"`
}

func (n *Node) listRealms(ctx context.Context, c *api.Call, _ api.NoInput) (RealmsOut, error) {
	f, err := n.needFederation()
	if err != nil {
		return RealmsOut{}, err
	}
	rs, err := f.Realms()
	return RealmsOut{Realms: rs}, err
}

type blockIn struct {
	Realm  string `json:"realm" jsonschema:"the realm name"`
	Reason string `json:"reason,omitempty" jsonschema:"a note for the record, at most 500 characters"`
}

// BlockOut is a block.
type BlockOut struct {
	Block federation.Block `json:"block"`
}

func (n *Node) blockRealm(ctx context.Context, c *api.Call, in blockIn) (BlockOut, error) {
	f, err := n.needFederation()
	if err != nil {
		return BlockOut{}, err
	}
	r, err := protocol.ParseRealm(in.Realm)
	if err != nil {
		return BlockOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "realm: %v", err).With("field", "realm").With("rule", "format")
	}
	if protocol.CodePoints(in.Reason) > 500 {
		return BlockOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "reason: at most 500 characters.").With("field", "reason").With("rule", "max_length")
	}
	b, err := f.BlockRealm(ctx, r, in.Reason)
	if errors.Is(err, federation.ErrOwnRealm) {
		return BlockOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "A realm cannot block itself.").With("field", "realm")
	}
	return BlockOut{Block: b}, err
}

type realmIn struct {
	Realm string `json:"realm" jsonschema:"the realm name"`
}

func (n *Node) unblockRealm(ctx context.Context, c *api.Call, in realmIn) (DoneOut, error) {
	f, err := n.needFederation()
	if err != nil {
		return DoneOut{}, err
	}
	r, err := protocol.ParseRealm(in.Realm)
	if err != nil {
		return DoneOut{}, protocol.Refusef(protocol.ReasonInvalidBody, "realm: %v", err).With("field", "realm").With("rule", "format")
	}
	if err := f.UnblockRealm(ctx, r); err != nil {
		return DoneOut{}, err
	}
	return DoneOut{OK: true}, nil
}
