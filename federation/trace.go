package federation

import (
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// gossipCounts count what GossipSub takes in, so that the copies of an event
// beyond the first, and the control traffic around them, can be seen.
type gossipCounts struct {
	messages   atomic.Uint64 // messages received, every copy
	duplicates atomic.Uint64 // copies dropped as already seen
	data       atomic.Uint64 // bytes of message data received, every copy
	dupData    atomic.Uint64 // bytes of message data in duplicates
	rpcs       atomic.Uint64 // RPCs received, messages and control
	ihave      atomic.Uint64 // message IDs offered in IHAVE
	iwant      atomic.Uint64 // message IDs asked for in IWANT
	idontwant  atomic.Uint64 // message IDs declined in IDONTWANT
}

// GossipCounters are the totals of gossipCounts.
type GossipCounters struct {
	Messages   uint64 `json:"messages" jsonschema:"gossip messages received, every copy"`
	Duplicates uint64 `json:"duplicates" jsonschema:"copies of messages already seen, dropped"`
	IHave      uint64 `json:"ihave_ids" jsonschema:"message IDs peers offered (IHAVE)"`
	IWant      uint64 `json:"iwant_ids" jsonschema:"message IDs peers asked for (IWANT)"`
	IDontWant  uint64 `json:"idontwant_ids" jsonschema:"message IDs peers declined (IDONTWANT)"`
	DataBytes  uint64 `json:"data_bytes" jsonschema:"bytes of message data received, every copy"`
	DupBytes   uint64 `json:"duplicate_bytes" jsonschema:"bytes of message data in copies already seen"`
	RPCs       uint64 `json:"rpcs" jsonschema:"GossipSub RPCs received (messages and control)"`
}

func (g *gossipCounts) totals() GossipCounters {
	return GossipCounters{Messages: g.messages.Load(), Duplicates: g.duplicates.Load(),
		IHave: g.ihave.Load(), IWant: g.iwant.Load(), IDontWant: g.idontwant.Load(),
		DataBytes: g.data.Load(), DupBytes: g.dupData.Load(), RPCs: g.rpcs.Load()}
}

var _ pubsub.RawTracer = (*gossipCounts)(nil)

func (g *gossipCounts) DuplicateMessage(m *pubsub.Message) {
	g.duplicates.Add(1)
	g.dupData.Add(uint64(len(m.GetData())))
}

func (g *gossipCounts) RecvRPC(rpc *pubsub.RPC) {
	g.messages.Add(uint64(len(rpc.GetPublish())))
	g.rpcs.Add(1)
	for _, m := range rpc.GetPublish() {
		g.data.Add(uint64(len(m.GetData())))
	}
	ctl := rpc.GetControl()
	if ctl == nil {
		return
	}
	var ihave, iwant, idontwant int
	for _, m := range ctl.GetIhave() {
		ihave += len(m.GetMessageIDs())
	}
	for _, m := range ctl.GetIwant() {
		iwant += len(m.GetMessageIDs())
	}
	for _, m := range ctl.GetIdontwant() {
		idontwant += len(m.GetMessageIDs())
	}
	g.ihave.Add(uint64(ihave))
	g.iwant.Add(uint64(iwant))
	g.idontwant.Add(uint64(idontwant))
}

func (g *gossipCounts) OnNewOutboundStream(peer.ID, protocol.ID)             {}
func (g *gossipCounts) OnClosedOutboundStream(peer.ID)                       {}
func (g *gossipCounts) Join(string)                                          {}
func (g *gossipCounts) Leave(string)                                         {}
func (g *gossipCounts) Graft(peer.ID, string)                                {}
func (g *gossipCounts) Prune(peer.ID, string)                                {}
func (g *gossipCounts) ValidateMessage(*pubsub.Message)                      {}
func (g *gossipCounts) DeliverMessage(*pubsub.Message)                       {}
func (g *gossipCounts) RejectMessage(*pubsub.Message, string)                {}
func (g *gossipCounts) ThrottlePeer(peer.ID)                                 {}
func (g *gossipCounts) SendRPC(*pubsub.RPC, peer.ID)                         {}
func (g *gossipCounts) SendRPCCompleted(*pubsub.RPC, peer.ID, time.Duration) {}
func (g *gossipCounts) DropRPC(*pubsub.RPC, peer.ID)                         {}
func (g *gossipCounts) UndeliverableMessage(*pubsub.Message)                 {}
