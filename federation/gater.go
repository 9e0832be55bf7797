package federation

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// gater admits a connection only from a peer the operator named, unless the
// realm is open to unknown realms; blocked realms' keys and cut links (a
// test hook) are refused either way.
type gater struct {
	mu      sync.RWMutex
	self    peer.ID
	open    bool
	allowed map[peer.ID]bool
	denied  map[peer.ID]bool // blocked realms' keys
	cut     map[peer.ID]bool
	// strangers is told of an inbound connection refused because the
	// operator did not name its peer (not a block or a cut): set once.
	strangers func(peer.ID, ma.Multiaddr)
}

var _ connmgr.ConnectionGater = (*gater)(nil)

func newGater(self peer.ID, open bool) *gater {
	return &gater{self: self, open: open, allowed: map[peer.ID]bool{}, denied: map[peer.ID]bool{}, cut: map[peer.ID]bool{}}
}

func (g *gater) admits(p peer.ID) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.cut[p] || g.denied[p] {
		return false
	}
	return p == g.self || g.open || g.allowed[p]
}

func (g *gater) set(m map[peer.ID]bool, p peer.ID, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if on {
		m[p] = true
	} else {
		delete(m, p)
	}
}

func (g *gater) InterceptPeerDial(p peer.ID) bool                 { return g.admits(p) }
func (g *gater) InterceptAddrDial(p peer.ID, _ ma.Multiaddr) bool { return g.admits(p) }
func (g *gater) InterceptAccept(network.ConnMultiaddrs) bool      { return true }
func (g *gater) InterceptSecured(dir network.Direction, p peer.ID, addrs network.ConnMultiaddrs) bool {
	if g.admits(p) {
		return true
	}
	g.mu.RLock()
	stranger := !g.cut[p] && !g.denied[p]
	g.mu.RUnlock()
	if stranger && dir == network.DirInbound && g.strangers != nil {
		g.strangers(p, addrs.RemoteMultiaddr())
	}
	return false
}
func (g *gater) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }
