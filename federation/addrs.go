package federation

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// ParseListenAddrs parses the --p2p listen multiaddrs.
func ParseListenAddrs(addrs []string) ([]ma.Multiaddr, error) {
	out := make([]ma.Multiaddr, 0, len(addrs))
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("--p2p %q: %w", s, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// ParsePeers parses --peer multiaddrs; each must end in /p2p/<peer id>, so
// that the connection is authenticated as that realm's key.
func ParsePeers(addrs []string) ([]peer.AddrInfo, error) {
	out := make([]peer.AddrInfo, 0, len(addrs))
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("peer address %q: %w", s, err)
		}
		info, err := peer.AddrInfoFromP2pAddr(a)
		if err != nil {
			return nil, fmt.Errorf("peer address %q: want a multiaddr ending in /p2p/<peer id>: %w", s, err)
		}
		out = append(out, *info)
	}
	return out, nil
}
