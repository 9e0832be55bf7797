package web

import (
	"errors"
	"fmt"
	"net/http"
	"sort"

	"relay/protocol"
)

// fedPoll is how often, in seconds, the federation page fetches itself
// besides the live stream: a peer connecting or backing off moves neither
// the store's sequence nor the registry, so the stream does not hear it.
const fedPoll = 5

// fedData is the federation page, gathered from the operator API
// (get_federation, its descriptor, peers and realms) as API clients get it.
type fedData struct {
	// Off is why the node does not federate: get_federation's refusal.
	Off      string
	Problems []string

	Status     map[string]any
	Descriptor map[string]any
	Peers      []map[string]any
	Realms     []map[string]any

	// Derived for the summary and the attention list.
	Connected   int
	Followed    int // realms other than this one with events held or known
	Behind      int // events seen at peers and not yet held, over every realm
	Blocked     int
	Quarantined []map[string]any
	Waiting     []map[string]any // realms with events that refer to a record not held here
	Conflicts   []map[string]any
	Equivocs    []map[string]any
	OwnChain    []map[string]any // this realm's key signing elsewhere
}

// Attention is how many things need the operator: key conflicts,
// equivocations, quarantined realms and realms with events not shown yet.
func (d *fedData) Attention() int {
	return len(d.OwnChain) + len(d.Conflicts) + len(d.Equivocs) + len(d.Quarantined) + len(d.Waiting)
}

func (c *Console) federationPage(w http.ResponseWriter, r *http.Request, s *visit) {
	d := c.gatherFederation(r, s)
	v := view{Title: "Federation", Nav: "federation", Data: d, Live: true}
	if d.Off == "" {
		v.Poll = fedPoll
	}
	c.render(w, r, s, http.StatusOK, "federation", v)
}

func (c *Console) gatherFederation(r *http.Request, s *visit) *fedData {
	ctx := r.Context()
	d := &fedData{}
	problem := func(what string, err error) {
		d.Problems = append(d.Problems, what+": "+c.refusal(err).Message)
	}
	st, err := c.call(ctx, s, "get_federation", nil)
	if err != nil {
		var ref *protocol.Refusal
		if errors.As(err, &ref) && ref.Reason == protocol.ReasonNotFound {
			d.Off = ref.Message
			return d
		}
		problem("status", err)
		return d
	}
	d.Status = st
	d.Connected = num(st["peers_connected"])
	d.Conflicts = maps(st["key_conflicts"])
	d.Equivocs = maps(st["equivocations"])
	d.OwnChain = maps(st["own_chain"])
	blocks := map[string]map[string]any{}
	for _, b := range maps(st["blocked"]) {
		blocks[fmt.Sprint(b["realm"])] = b
	}
	if desc, err := c.call(ctx, s, "get_federation_descriptor", nil); err != nil {
		problem("descriptor", err)
	} else {
		d.Descriptor = desc
	}

	heads := map[string]int{}
	if out, err := c.call(ctx, s, "get_federation_realms", nil); err != nil {
		problem("realms", err)
	} else {
		d.Realms = maps(out["realms"])
		for _, rs := range d.Realms {
			name := fmt.Sprint(rs["realm"])
			heads[name] = num(rs["seq"])
			if b, ok := blocks[name]; ok {
				rs["block_reason"], rs["blocked_at"] = b["reason"], b["at"]
			}
			if rs["local"] != true {
				d.Followed++
				d.Behind += num(rs["lag"])
			}
			if rs["blocked"] == true {
				d.Blocked++
			}
			if q, _ := rs["quarantined"].(string); q != "" {
				d.Quarantined = append(d.Quarantined, rs)
			}
			if w, _ := rs["waiting"].(string); w != "" {
				d.Waiting = append(d.Waiting, rs)
			}
		}
		// This realm first; the rest by name, as the API lists them.
		sort.SliceStable(d.Realms, func(i, j int) bool { return d.Realms[i]["local"] == true && d.Realms[j]["local"] != true })
	}

	if out, err := c.call(ctx, s, "get_federation_peers", nil); err != nil {
		problem("peers", err)
	} else {
		d.Peers = maps(out["peers"])
		peerState := map[string]string{}
		for _, p := range d.Peers {
			peerState[fmt.Sprint(p["peer_id"])] = fmt.Sprint(p["state"])
			// What the peer acknowledged, against what this node holds.
			acked, _ := p["acknowledged"].(map[string]any)
			var acks []map[string]any
			for _, realm := range sortedKeys(acked) {
				seq := num(acked[realm])
				a := map[string]any{"realm": realm, "seq": seq}
				if h := heads[realm]; h > seq {
					a["behind"] = h - seq
				}
				acks = append(acks, a)
			}
			p["acks"] = acks
			if b, ok := blocks[fmt.Sprint(p["realm"])]; ok && b != nil {
				p["realm_blocked"] = true
			}
		}
		for _, rs := range d.Realms {
			if st, ok := peerState[fmt.Sprint(rs["peer_id"])]; ok && rs["local"] != true {
				rs["peer_state"] = st
			}
		}
	}
	return d
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
