package federation

import (
	"fmt"
	"net"
	"slices"

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
		if !listenable(a) {
			return nil, fmt.Errorf("--p2p %q: the node listens on /ip4/<address>/tcp/<port> or /ip4/<address>/udp/<port>/quic-v1 (or /ip6/…)", s)
		}
		out = append(out, a)
	}
	return out, nil
}

// listenable reports whether a is an address the node's transports, TCP
// and QUIC, listen on: an IP, then tcp, or udp and quic-v1, and nothing
// more (libp2p would start and fail to listen on any other, or on one with
// a /p2p part).
func listenable(a ma.Multiaddr) bool {
	var codes []int
	for _, p := range a.Protocols() {
		codes = append(codes, p.Code)
	}
	if len(codes) < 2 || codes[0] != ma.P_IP4 && codes[0] != ma.P_IP6 {
		return false
	}
	return slices.Equal(codes[1:], []int{ma.P_TCP}) || slices.Equal(codes[1:], []int{ma.P_UDP, ma.P_QUIC_V1})
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
		if len(info.Addrs) == 0 { // the node finds no peer by its id alone
			return nil, fmt.Errorf("peer address %q: want where to dial as well, such as /ip4/192.0.2.1/tcp/4001/p2p/<peer id>", s)
		}
		out = append(out, *info)
	}
	return out, nil
}

// CheckListenFree reports an error naming the first of the --p2p listen
// addresses whose TCP or UDP port is taken, found before the node makes
// anything, as --http's is; port 0 and other transports are not checked.
// The ports are bound for a moment and released, so another process may
// still take one before the node listens.
func CheckListenFree(addrs []string) error {
	parsed, err := ParseListenAddrs(addrs)
	if err != nil {
		return err
	}
	for i, a := range parsed {
		host, err := a.ValueForProtocol(ma.P_IP4)
		if err != nil {
			if host, err = a.ValueForProtocol(ma.P_IP6); err != nil {
				continue
			}
		}
		if port, err := a.ValueForProtocol(ma.P_TCP); err == nil && port != "0" {
			l, err := net.Listen("tcp", net.JoinHostPort(host, port))
			if err != nil {
				return fmt.Errorf("--p2p %s: %w", addrs[i], err)
			}
			l.Close()
		}
		if port, err := a.ValueForProtocol(ma.P_UDP); err == nil && port != "0" {
			c, err := net.ListenPacket("udp", net.JoinHostPort(host, port))
			if err != nil {
				return fmt.Errorf("--p2p %s: %w", addrs[i], err)
			}
			c.Close()
		}
	}
	return nil
}
