// Package clientaddr says which clients a per-address limit counts as one.
package clientaddr

import (
	"net"
	"net/netip"
)

// Key is the part of a remote address (host:port, as http.Request's
// RemoteAddr) that a per-address limit is kept for: an IPv4 address, or an
// IPv6 address's /64, which one host commonly holds whole (an IPv4 address
// mapped into IPv6 counts as IPv4). Text that is no IP address is its own
// key.
func Key(remote string) string {
	ip, ok := parse(remote)
	if !ok {
		return host(remote)
	}
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.WithZone("").Prefix(64)
	return p.String()
}

// Loopback reports whether the remote address is a loopback address.
func Loopback(remote string) bool {
	ip, ok := parse(remote)
	return ok && ip.IsLoopback()
}

func parse(remote string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(host(remote))
	return ip.Unmap(), err == nil
}

func host(remote string) string {
	h, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return h
}
